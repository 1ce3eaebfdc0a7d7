-- Verify runq:function_tick on pg

\set function 'runq.tick(integer)'
\set callers 'runq_worker runq_admin'
-- This version counts a run waiting for its children.
\set body 'waiting_for_children'
\ir lib/function.sql
