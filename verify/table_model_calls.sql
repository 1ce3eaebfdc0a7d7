-- Verify runq:table_model_calls on pg

BEGIN;

SELECT run_id, seq, epoch, applied, created_at, request_hash, response, usage
  FROM runq.model_calls WHERE false;

DO $$
BEGIN
    ASSERT EXISTS (SELECT FROM pg_catalog.pg_constraint AS c
                    WHERE c.conrelid = 'runq.model_calls'::regclass AND c.conname = 'model_calls_pkey'),
        'runq.model_calls has no model_calls_pkey';
    ASSERT EXISTS (SELECT FROM pg_catalog.pg_constraint AS c
                    WHERE c.conrelid = 'runq.model_calls'::regclass AND c.contype = 'f'
                      AND c.confrelid = 'runq.runs'::regclass AND c.confdeltype = 'c'),
        'runq.model_calls has no foreign key to runq.runs that cascades';
    ASSERT EXISTS (SELECT FROM pg_catalog.pg_index AS i
                    WHERE i.indexrelid = 'runq.model_calls_applied_key'::regclass AND i.indisunique
                      AND pg_catalog.pg_get_expr(i.indpred, i.indrelid) = 'applied'),
        'runq.model_calls_applied_key is not a unique index of the applied rows';
END $$;

ROLLBACK;
