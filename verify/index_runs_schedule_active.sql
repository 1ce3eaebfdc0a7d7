-- Verify runq:index_runs_schedule_active on pg

\set index runq.runs_schedule_active_key
\ir lib/index.sql

\ir lib/begin.sql
DO $$
BEGIN
    -- unique on schedule, over the non-terminal runs that have one
    ASSERT (SELECT pg_catalog.pg_get_indexdef(i.indexrelid) LIKE '%UNIQUE INDEX%USING btree (schedule) WHERE%'
                   AND pg_catalog.pg_get_expr(i.indpred, i.indrelid) LIKE '%schedule IS NOT NULL%'
                   AND pg_catalog.pg_get_expr(i.indpred, i.indrelid) LIKE '%queued%running%waiting_for_user%'
              FROM pg_catalog.pg_index AS i
             WHERE i.indexrelid = 'runq.runs_schedule_active_key'::regclass),
        'runs_schedule_active_key is not UNIQUE (schedule) over the non-terminal runs with a schedule';
END $$;
ROLLBACK;

BEGIN;
-- This version holds the runs waiting for their children.
SELECT 1/(pg_get_indexdef('runq.runs_schedule_active_key'::regclass) LIKE '%waiting_for_children%')::integer;
ROLLBACK;
