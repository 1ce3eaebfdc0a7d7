-- Verify runq:function_list_runs on pg

\set function 'runq.list_runs(text, text, text, bigint, integer)'
\set callers 'runq_admin runq_observer'
\set volatility s
-- This version returns parent_run_id.
\set body 'r.parent_run_id'
\ir lib/function.sql
