-- Verify runq:index_run_events_requeued on pg

\set index runq.run_events_requeued_idx
\ir lib/index.sql

\ir lib/begin.sql
DO $$
BEGIN
    ASSERT (SELECT pg_catalog.pg_get_indexdef(i.indexrelid) LIKE '%USING btree (run_id) WHERE%'
                   AND pg_catalog.pg_get_expr(i.indpred, i.indrelid) LIKE '%run.requeued%lease_expired%'
              FROM pg_catalog.pg_index AS i
             WHERE i.indexrelid = 'runq.run_events_requeued_idx'::regclass),
        'run_events_requeued_idx is not (run_id) over the run.requeued events of an expired lease';
END $$;
ROLLBACK;
