-- Verify runq:trigger_runs_wake on pg

BEGIN;

DO $$
BEGIN
    ASSERT (SELECT count(*) FROM pg_catalog.pg_trigger AS t
             WHERE t.tgrelid = 'runq.runs'::regclass AND t.tgenabled = 'O'
               AND t.tgname = 'runs_wake' AND t.tgdeferrable AND t.tginitdeferred
               AND t.tgfoid = 'runq._wake_idle()'::regprocedure) = 1,
        'the deferred wake-up trigger of runq.runs is missing, disabled or not deferred';
END $$;

ROLLBACK;
