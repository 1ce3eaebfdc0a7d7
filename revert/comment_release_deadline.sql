-- Revert runq:comment_release_deadline from pg

BEGIN;

COMMENT ON FUNCTION runq.release(bigint,bigint) IS
$c$Give back the lease of a run this worker holds under epoch (graceful shutdown): the run takes the lease-expiry path of runq.sweep now, without using up the attempt and without backoff. A resume run is queued again at once; a fail run, or a zero_work run that did work, fails with code orphaned; a cancel-requested run is cancelled. Returns true, or false when fenced.
Raises 22023 (NULL run_id or epoch), RQ003 (no such run).$c$;

COMMIT;
