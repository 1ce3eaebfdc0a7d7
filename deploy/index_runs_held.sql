-- Deploy runq:index_runs_held to pg
-- requires: table_runs

BEGIN;

-- Runs that hold a worker or a user: the sweep reads the running ones, the
-- stats and the orphan report both. Deliberately not keyed on lease_expires_at
-- or heartbeat_at: a heartbeat must change no indexed column to stay HOT. The
-- sweep filters the (few, one per busy worker) running rows instead.
CREATE INDEX runs_held_idx ON runq.runs (status, priority)
    WHERE status IN ('running', 'waiting_for_user');

COMMIT;
