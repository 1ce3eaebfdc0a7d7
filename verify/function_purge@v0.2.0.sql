-- Verify runq:function_purge on pg

\set function 'runq.purge(interval, integer, boolean)'
\set callers 'runq_admin'
-- This version deletes the runs' usage totals.
\set body 'DELETE FROM runq.run_usage'
\ir lib/function.sql
