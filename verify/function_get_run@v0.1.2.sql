-- Verify runq:function_get_run on pg

\set function 'runq.get_run(bigint)'
\set callers 'runq_client runq_admin'
\ir lib/function.sql
