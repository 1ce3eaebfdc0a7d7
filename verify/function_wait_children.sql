-- Verify runq:function_wait_children on pg

\set function 'runq.wait_children(bigint, bigint)'
\set callers 'runq_worker runq_admin'
\ir lib/function.sql
