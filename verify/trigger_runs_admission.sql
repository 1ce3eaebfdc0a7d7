-- Verify runq:trigger_runs_admission on pg

BEGIN;

DO $$
BEGIN
    ASSERT (SELECT count(*) FROM pg_catalog.pg_trigger AS t
             WHERE t.tgrelid = 'runq.runs'::regclass AND t.tgenabled = 'O'
               AND t.tgname = 'runs_admit_new') = 1,
        'the admission trigger of runq.runs is missing or disabled';
END $$;

ROLLBACK;
