-- Deploy runq:index_runs_dead_letter to pg
-- requires: table_runs

BEGIN;

-- The dead letter, newest first per class, for queue_stats and operators,
-- without reading the runs that succeeded.
CREATE INDEX runs_dead_letter_idx ON runq.runs (priority, finished_at)
    WHERE status = 'failed';

COMMIT;
