-- Verify runq:function_release on pg

\set function 'runq.release(bigint, bigint)'
\set callers 'runq_worker runq_admin'
\ir lib/function.sql
