-- Deploy runq:comment_release_deadline to pg
-- requires: comments_raises
-- requires: function__expire_leases

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- release takes the lease-expiry path, which fails a run past its
-- deadline (runq._expire_leases); its comment, and so docs/API.md, says so.
COMMENT ON FUNCTION runq.release(bigint,bigint) IS
$c$Give back the lease of a run this worker holds under epoch (graceful shutdown): the run takes the lease-expiry path of runq.sweep now, without using up the attempt and without backoff. A resume run is queued again at once; a fail run, or a zero_work run that did work, fails with code orphaned; a cancel-requested run is cancelled; a run past its deadline fails with code deadline_exceeded. Returns true, or false when fenced.
Raises 22023 (NULL run_id or epoch), RQ003 (no such run).$c$;

COMMIT;
