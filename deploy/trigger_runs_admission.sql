-- Deploy runq:trigger_runs_admission to pg
-- requires: admission
-- Locks: SHARE ROW EXCLUSIVE on runq.runs for a catalog update, waiting at most 2 s for it.

BEGIN;

-- CREATE TRIGGER takes SHARE ROW EXCLUSIVE on runs for a moment: it queues
-- behind open writers and every writer behind it, hence the short timeout.
SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- Every new run is admitted or parked here, whichever function inserts it
-- (deploy/admission.sql says why). No trigger on UPDATE: the functions that
-- move runs call runq._slot_left and runq._requeued themselves.
CREATE TRIGGER runs_admit_new BEFORE INSERT ON runq.runs
    FOR EACH ROW EXECUTE FUNCTION runq._park_on_entry();

COMMIT;
