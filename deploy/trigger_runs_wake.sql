-- Deploy runq:trigger_runs_wake to pg
-- requires: wake_idle
-- requires: table_runs
-- requires: column_runs_parked
-- Locks: SHARE ROW EXCLUSIVE on runq.runs for a catalog update, waiting at most 2 s for it.

BEGIN;

-- CREATE TRIGGER takes SHARE ROW EXCLUSIVE on runs for a moment: it queues
-- behind open writers and every writer behind it, hence the short timeout.
SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- Every run inserted claimable now (submit, tick) wakes an idle worker when
-- its transaction commits (deploy/wake_idle.sql). Deferred: the check runs
-- at commit, so the wake lock is held for the commit only, however long the
-- transaction was open. INSERT only: an AFTER UPDATE trigger on runs, even
-- one whose WHEN is false, cost every claim and complete 5 % more
-- instructions (bench/instructions.py). The rarer ways back into the queue
-- (deliver_input, a requeue, redrive, an admission, resume) keep their
-- NOTIFY in every case.
CREATE CONSTRAINT TRIGGER runs_wake
    AFTER INSERT ON runq.runs
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW
    WHEN (NEW.status = 'queued' AND NOT NEW.parked AND NEW.ready_at <= clock_timestamp())
    EXECUTE FUNCTION runq._wake_idle();

COMMIT;
