-- Revert runq:domain_run_status from pg
-- (back to the statuses of v0.2.0)
-- Locks: ACCESS EXCLUSIVE on the domain runq.run_status for a catalog update, waiting at most 2 s for it.

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- A run waiting for its children would be stranded in a status the old
-- functions know nothing of: refuse, and say what to do. One probe of
-- runs_held_idx (reverted after this change).
DO $$
BEGIN
    IF EXISTS (SELECT FROM runq.runs WHERE status = 'waiting_for_children') THEN
        RAISE EXCEPTION 'runs are waiting_for_children: cancel them (runq.cancel) before reverting';
    END IF;
END
$$;

ALTER DOMAIN runq.run_status DROP CONSTRAINT run_status_check;
ALTER DOMAIN runq.run_status ADD CONSTRAINT run_status_check CHECK (
    VALUE IN ('queued', 'running', 'waiting_for_user', 'succeeded',
              'failed', 'cancelled')) NOT VALID;

COMMENT ON DOMAIN runq.run_status IS
    'A run''s status: queued, running, waiting_for_user (non-terminal), succeeded, failed, cancelled (terminal).';

COMMIT;
