-- Verify runq:function_heartbeat on pg

\set function 'runq.heartbeat(bigint, bigint)'
\set callers 'runq_worker runq_admin'
-- This version fails a run past its deadline.
\set body 'r.deadline > v_now'
\ir lib/function.sql
