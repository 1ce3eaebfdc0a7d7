-- Verify runq:function_checkpoint on pg

\set function 'runq.checkpoint(bigint, bigint, jsonb)'
\set callers 'runq_worker runq_admin'
-- This version fails a run past its deadline.
\set body 'r.deadline > v_now'
\ir lib/function.sql
