-- Revert runq:check_runs_shape_validated from pg

BEGIN;

SET LOCAL lock_timeout = '2s';

-- The five CHECKs as table_runs created them. Every row passes them, since
-- runs_shape_consistent (still in place) checks the same invariants.
ALTER TABLE runq.runs
    ADD CONSTRAINT runs_leased_iff_running
        CHECK ((status = 'running') = (lease_expires_at IS NOT NULL AND lease IS NOT NULL)) NOT VALID,
    ADD CONSTRAINT runs_finished_iff_terminal
        CHECK ((status IN ('succeeded', 'failed', 'cancelled')) = (finished_at IS NOT NULL)) NOT VALID,
    ADD CONSTRAINT runs_failure_iff_failed
        CHECK ((status = 'failed') = (failure IS NOT NULL)) NOT VALID,
    ADD CONSTRAINT runs_question_iff_waiting
        CHECK ((status = 'waiting_for_user') = (question IS NOT NULL)) NOT VALID,
    ADD CONSTRAINT runs_expires_with_ttl
        CHECK ((queue_ttl IS NULL) = (expires_at IS NULL)) NOT VALID;
ALTER TABLE runq.runs VALIDATE CONSTRAINT runs_leased_iff_running;
ALTER TABLE runq.runs VALIDATE CONSTRAINT runs_finished_iff_terminal;
ALTER TABLE runq.runs VALIDATE CONSTRAINT runs_failure_iff_failed;
ALTER TABLE runq.runs VALIDATE CONSTRAINT runs_question_iff_waiting;
ALTER TABLE runq.runs VALIDATE CONSTRAINT runs_expires_with_ttl;

-- runs_shape_consistent stays as VALIDATE left it; check_runs_shape's revert
-- drops it.

COMMIT;
