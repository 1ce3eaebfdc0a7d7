-- Deploy runq:check_runs_shape to pg
-- requires: table_runs
-- requires: domain_run_shape

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- Every row runq.runs writes must have a consistent shape. The cast raises
-- check_violation (23514), naming the invariant broken, as the five table
-- CHECKs it replaces did; run_id IS NOT NULL only turns the cast into a
-- boolean (run_id is never NULL).
--
-- NOT VALID: existing rows are checked by VALIDATE in the next change, which
-- does not block writers; adding it this way holds its ACCESS EXCLUSIVE lock
-- only for a catalog update, not for a scan of the table.
ALTER TABLE runq.runs
    ADD CONSTRAINT runs_shape_consistent CHECK ((ROW(
        status,
        lease_expires_at IS NOT NULL, lease IS NOT NULL, finished_at IS NOT NULL,
        failure IS NOT NULL, question IS NOT NULL, queue_ttl IS NOT NULL, expires_at IS NOT NULL
    )::runq.run_shape::runq.consistent_run_shape).status IS NOT NULL) NOT VALID;

COMMIT;
