-- Deploy runq:comments_raises to pg
-- requires: function_begin_turn
-- requires: function_complete
-- requires: function_heartbeat
-- requires: function_release
-- requires: function_fail

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- These five worker calls raise 22023 for a NULL run_id or epoch (through
-- runq._refuse) but their comments, and so docs/API.md, did not say so.

COMMENT ON FUNCTION runq.begin_turn(bigint,bigint) IS
$c$Record, before a chargeable model call, that a run this worker holds under epoch starts a turn (the run's turn count grows; a run with a turn is never requeued under the zero_work policy). Returns true, or false when fenced or when cancel was requested (the run becomes cancelled).
Raises 22023 (NULL run_id or epoch), RQ003 (no such run).$c$;

COMMENT ON FUNCTION runq.complete(bigint,bigint,jsonb) IS
$c$Mark a run this worker holds under epoch succeeded, with an optional result. Returns true, or false when fenced (the run is no longer running under this epoch; nothing changes but one run.fenced event).
Raises 22023 (NULL run_id or epoch), RQ003 (no such run).$c$;

COMMENT ON FUNCTION runq.heartbeat(bigint,bigint) IS
$c$Extend the lease of a run this worker holds under epoch by the lease's length. Returns true, or false when the worker must stop: the run is no longer running under this epoch (fenced: one run.fenced event is logged) or cancel was requested (the run becomes cancelled now).
Raises 22023 (NULL run_id or epoch), RQ003 (no such run).$c$;

COMMENT ON FUNCTION runq.release(bigint,bigint) IS
$c$Give back the lease of a run this worker holds under epoch (graceful shutdown): the run takes the lease-expiry path of runq.sweep now, without using up the attempt and without backoff. A resume run is queued again at once; a fail run, or a zero_work run that did work, fails with code orphaned; a cancel-requested run is cancelled. Returns true, or false when fenced.
Raises 22023 (NULL run_id or epoch), RQ003 (no such run).$c$;

COMMENT ON FUNCTION runq.fail(bigint,bigint,jsonb) IS
$c$Fail a run this worker holds under epoch, permanently: it goes to the dead letter (status failed) and is never retried by the queue; runq.redrive brings it back. failure is an object with a string code and optionally a message; attempt, epoch and at are added. Returns true, or false when fenced.
Raises 22023 (NULL run_id or epoch, a failure that is not an object with a string code), RQ003 (no such run).$c$;

COMMIT;
