-- Deploy runq:index_runs_held to pg
-- requires: table_runs

BEGIN;

-- Runs that hold a worker or a user: the sweep reads the running ones, the
-- stats and the orphan report both. Deliberately not keyed on lease_expires_at
-- or heartbeat_at: a heartbeat must change no indexed column to stay HOT. The
-- sweep filters the (few, one per busy worker) running rows instead.
-- Keyed on run_id, not status: a worker's fenced write looks a run up by
-- run_id AND status = 'running', and with a status key the planner would
-- take this index and walk every running run to find one.
CREATE INDEX runs_held_idx ON runq.runs (run_id)
    WHERE status IN ('running', 'waiting_for_user');

COMMIT;
