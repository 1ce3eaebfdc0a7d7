-- Verify runq:function_dead_letter on pg

\set function 'runq.dead_letter(integer)'
\set callers 'runq_admin'
-- This version returns parent_run_id.
\set body 'r.parent_run_id'
\ir lib/function.sql
