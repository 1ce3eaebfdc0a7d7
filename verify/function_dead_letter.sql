-- Verify runq:function_dead_letter on pg

\set function 'runq.dead_letter(integer)'
\set callers 'runq_admin'
-- This version shows usage, budget and deadline.
\set body 'r.usage, r.budget, r.deadline'
\ir lib/function.sql
