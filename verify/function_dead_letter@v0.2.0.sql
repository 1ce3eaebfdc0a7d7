-- Verify runq:function_dead_letter on pg

\set function 'runq.dead_letter(integer)'
\set callers 'runq_admin'
-- This version shows usage (from runq.run_usage), budget and deadline.
\set body 'LEFT JOIN runq.run_usage'
\ir lib/function.sql
