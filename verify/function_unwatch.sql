-- Verify runq:function_unwatch on pg

\set function 'runq.unwatch(bigint)'
\set callers 'runq_client runq_admin'
\ir lib/function.sql
