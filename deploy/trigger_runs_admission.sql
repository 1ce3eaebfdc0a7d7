-- Deploy runq:trigger_runs_admission to pg
-- requires: admission
-- Locks: SHARE ROW EXCLUSIVE on runq.runs for three catalog updates, waiting at most 2 s for it.

BEGIN;

-- CREATE TRIGGER takes SHARE ROW EXCLUSIVE on runs for a moment: it queues
-- behind open writers and every writer behind it, hence the short timeout.
SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- Every way into the queue and out of a slot passes here, whichever function
-- wrote it (deploy/admission.sql says why). The claim (queued to running) and
-- the heartbeat (no status in its SET list) fire none of them.
CREATE TRIGGER runs_admit_new BEFORE INSERT ON runq.runs
    FOR EACH ROW WHEN (NEW.status = 'queued')
    EXECUTE FUNCTION runq._park_on_entry();

CREATE TRIGGER runs_admit_requeued BEFORE UPDATE OF status ON runq.runs
    FOR EACH ROW WHEN (OLD.status <> 'queued' AND NEW.status = 'queued')
    EXECUTE FUNCTION runq._park_on_entry();

CREATE TRIGGER runs_hand_on_slot AFTER UPDATE OF status ON runq.runs
    FOR EACH ROW WHEN (OLD.status IN ('queued', 'running') AND NOT OLD.parked
                       AND NEW.status NOT IN ('queued', 'running'))
    EXECUTE FUNCTION runq._hand_on_slot();

COMMIT;
