-- Verify runq:function_get_run on pg

\set function 'runq.get_run(bigint)'
\set callers 'runq_client runq_admin'
-- This version shows usage (from runq.run_usage), budget and deadline.
\set body 'LEFT JOIN runq.run_usage'
\ir lib/function.sql
