-- Deploy runq:index_runs_queue_expiry to pg
-- requires: table_runs

BEGIN;

-- Queued runs with a queue_ttl, by when they expire: the sweep fails the
-- overdue ones without reading the backlog.
CREATE INDEX runs_queue_expiry_idx ON runq.runs (expires_at)
    WHERE status = 'queued' AND expires_at IS NOT NULL;

COMMIT;
