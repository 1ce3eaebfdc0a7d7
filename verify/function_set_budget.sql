-- Verify runq:function_set_budget on pg

\set function 'runq.set_budget(bigint, jsonb)'
\set callers 'runq_admin'
-- This version counts a run waiting for its children.
\set body 'waiting_for_children'
\ir lib/function.sql
