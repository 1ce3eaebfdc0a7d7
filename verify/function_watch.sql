-- Verify runq:function_watch on pg

\set function 'runq.watch(bigint)'
\set callers 'runq_client runq_admin'
\ir lib/function.sql
