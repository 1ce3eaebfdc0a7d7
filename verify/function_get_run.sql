-- Verify runq:function_get_run on pg

\set function 'runq.get_run(bigint)'
\set callers 'runq_client runq_admin'
-- This version returns parent_run_id.
\set body 'r.parent_run_id'
\ir lib/function.sql
