-- Deploy runq:index_runs_ready to pg
-- requires: table_runs

BEGIN;

-- The claim path: per class, oldest ready first. A claim walks this index in
-- key order for each requested class and stops at the first run whose ready_at
-- is in the future, so neither other classes nor delayed runs cost it a read.
-- run_id makes the order total. A claim's own update drops the run out of the
-- predicate, so the index holds only the backlog.
CREATE INDEX runs_ready_idx ON runq.runs (priority, ready_at, run_id)
    WHERE status = 'queued';

COMMIT;
