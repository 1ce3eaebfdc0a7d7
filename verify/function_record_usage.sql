-- Verify runq:function_record_usage on pg

\set function 'runq.record_usage(bigint, bigint, jsonb)'
\set callers 'runq_worker runq_admin'
-- This version adds the usage to every ancestor's totals.
\set body 'ancestors (run_id, depth)'
\ir lib/function.sql
