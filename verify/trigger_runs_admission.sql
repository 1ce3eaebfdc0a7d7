-- Verify runq:trigger_runs_admission on pg

BEGIN;

DO $$
BEGIN
    ASSERT (SELECT count(*) FROM pg_catalog.pg_trigger AS t
             WHERE t.tgrelid = 'runq.runs'::regclass AND t.tgenabled = 'O'
               AND t.tgname IN ('runs_admit_new', 'runs_admit_requeued', 'runs_hand_on_slot')) = 3,
        'the admission triggers of runq.runs are missing or disabled';
END $$;

ROLLBACK;
