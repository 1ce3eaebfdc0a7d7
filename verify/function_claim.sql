-- Verify runq:function_claim on pg

\set function 'runq.claim(integer[], text, interval, integer, text[])'
\set callers 'runq_worker runq_admin'
-- This version returns the run's deadline, budget and usage.
\set body 'c.deadline, c.budget,'
\ir lib/function.sql
