-- Verify runq:index_runs_list_kind on pg

\set index runq.runs_list_kind_idx
\ir lib/index.sql

\ir lib/begin.sql
DO $$
BEGIN
    ASSERT (SELECT pg_catalog.pg_get_indexdef(i.indexrelid) LIKE '%USING btree (kind, status, run_id) WHERE%'
                   AND pg_catalog.pg_get_expr(i.indpred, i.indrelid) LIKE '%status%<>%running%'
              FROM pg_catalog.pg_index AS i
             WHERE i.indexrelid = 'runq.runs_list_kind_idx'::regclass),
        'runs_list_kind_idx is not (kind, status, run_id) over the runs that are not running';
END $$;
ROLLBACK;
