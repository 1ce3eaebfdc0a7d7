-- Verify runq:index_runs_held on pg

\set index runq.runs_held_idx
\ir lib/index.sql

BEGIN;
-- This version holds the runs waiting for their children.
SELECT 1/(pg_get_indexdef('runq.runs_held_idx'::regclass) LIKE '%waiting_for_children%')::integer;
ROLLBACK;
