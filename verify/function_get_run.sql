-- Verify runq:function_get_run on pg

\set function 'runq.get_run(bigint)'
\set callers 'runq_client runq_admin'
-- This version shows usage, budget and deadline.
\set body 'r.usage, r.budget, r.deadline'
\ir lib/function.sql
