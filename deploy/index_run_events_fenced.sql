-- Deploy runq:index_run_events_fenced to pg
-- requires: table_run_events

BEGIN;

-- At most one run.fenced per run and stale epoch: a fenced worker that keeps
-- calling (a heartbeat loop) inserts with ON CONFLICT DO NOTHING against this.
-- Partial, so ordinary events pay only the predicate, not an index entry.
CREATE UNIQUE INDEX run_events_fenced_key ON runq.run_events (run_id, epoch)
    WHERE type = 'run.fenced';

COMMIT;
