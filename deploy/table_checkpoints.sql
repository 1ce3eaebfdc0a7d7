-- Deploy runq:table_checkpoints to pg
-- requires: table_runs
-- requires: sequence_progress

BEGIN;

-- A run's loop state at tool-invocation boundaries, newest last. A claim
-- resumes from runq.runs.last_checkpoint; older rows stay for operators.
CREATE TABLE runq.checkpoints (
    run_id      bigint      NOT NULL REFERENCES runq.runs (run_id),
    seq         bigint      NOT NULL DEFAULT nextval('runq.progress_seq'),
    epoch       bigint      NOT NULL,
    created_at  timestamptz NOT NULL,
    state       jsonb       NOT NULL,
    PRIMARY KEY (run_id, seq)
);

COMMENT ON TABLE runq.checkpoints IS
    'Checkpoints written by runq.checkpoint; the newest is handed to the next claim.';

COMMIT;
