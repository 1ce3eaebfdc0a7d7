-- Revert runq:comments_raises from pg
-- (the comments as v0.1.2 released them)

BEGIN;

COMMENT ON FUNCTION runq.begin_turn(bigint,bigint) IS
$c$Record, before a chargeable model call, that a run this worker holds under epoch starts a turn (the run's turn count grows; a run with a turn is never requeued under the zero_work policy). Returns true, or false when fenced or when cancel was requested (the run becomes cancelled).
Raises RQ003 (no such run).$c$;

COMMENT ON FUNCTION runq.complete(bigint,bigint,jsonb) IS
$c$Mark a run this worker holds under epoch succeeded, with an optional result. Returns true, or false when fenced (the run is no longer running under this epoch; nothing changes but one run.fenced event).
Raises RQ003 (no such run).$c$;

COMMENT ON FUNCTION runq.heartbeat(bigint,bigint) IS
$c$Extend the lease of a run this worker holds under epoch by the lease's length. Returns true, or false when the worker must stop: the run is no longer running under this epoch (fenced: one run.fenced event is logged) or cancel was requested (the run becomes cancelled now).
Raises RQ003 (no such run).$c$;

COMMENT ON FUNCTION runq.release(bigint,bigint) IS
$c$Give back the lease of a run this worker holds under epoch (graceful shutdown): the run takes the lease-expiry path of runq.sweep now, without using up the attempt and without backoff. A resume run is queued again at once; a fail run, or a zero_work run that did work, fails with code orphaned; a cancel-requested run is cancelled. Returns true, or false when fenced.
Raises RQ003 (no such run).$c$;

COMMENT ON FUNCTION runq.fail(bigint,bigint,jsonb) IS
$c$Fail a run this worker holds under epoch, permanently: it goes to the dead letter (status failed) and is never retried by the queue; runq.redrive brings it back. failure is an object with a string code and optionally a message; attempt, epoch and at are added. Returns true, or false when fenced.
Raises RQ003 (no such run), 22023 (failure not an object with a string code).$c$;

COMMIT;
