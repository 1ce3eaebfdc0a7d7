-- Verify runq:function_release on pg

\set function 'runq.release(bigint, bigint)'
\set callers 'runq_worker runq_admin'
-- This version locks a child's parent first.
\set body 'runq._lock_parents('
\ir lib/function.sql
