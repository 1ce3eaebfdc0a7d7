-- Verify runq:index_runs_session_active on pg

\set index runq.runs_session_active_key
\ir lib/index.sql

BEGIN;
-- This version holds the runs waiting for their children.
SELECT 1/(pg_get_indexdef('runq.runs_session_active_key'::regclass) LIKE '%waiting_for_children%')::integer;
ROLLBACK;
