-- Verify runq:index_run_events_created on pg

\set index runq.run_events_created_idx
\ir lib/index.sql

\ir lib/begin.sql
DO $$
BEGIN
    ASSERT (SELECT pg_catalog.pg_get_indexdef(i.indexrelid) LIKE '%USING brin (created_at)%'
                   AND i.indpred IS NULL
              FROM pg_catalog.pg_index AS i
             WHERE i.indexrelid = 'runq.run_events_created_idx'::regclass),
        'run_events_created_idx is not a BRIN index of every event''s created_at';
END $$;
ROLLBACK;
