-- Deploy runq:table_run_output to pg
-- requires: table_runs
-- Locks: none on existing tables (a new table).

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- A run's output stream (runq.emit, runq.read_output): chunks numbered per
-- run 1, 2, 3, ... without gaps, each under the epoch that wrote it. Read by
-- key range (run_id, seq > n), so the key is the only index. No foreign key,
-- as in runq.run_events: its check would cost every chunk a lookup of the
-- run that emit has just locked; runq.purge deletes a run's output with it,
-- and emit writes only to a running run, which purge never takes.
CREATE TABLE runq.run_output (
    run_id     bigint      NOT NULL,
    seq        bigint      NOT NULL,
    epoch      bigint      NOT NULL,
    created_at timestamptz NOT NULL,
    chunk      jsonb       NOT NULL,
    PRIMARY KEY (run_id, seq)
);

COMMENT ON TABLE runq.run_output IS
    'The output of runs (runq.emit): chunk seq of a run, numbered 1, 2, 3, ... without gaps in the order the emits committed, under the epoch that wrote it.';

COMMIT;
