-- Deploy runq:table_inputs to pg
-- requires: table_runs
-- requires: sequence_progress

BEGIN;

-- User input delivered to a waiting_for_user run. A claim hands over the
-- inputs delivered after the newest checkpoint (seq is shared with it).
CREATE TABLE runq.inputs (
    run_id        bigint      NOT NULL REFERENCES runq.runs (run_id),
    seq           bigint      NOT NULL DEFAULT nextval('runq.progress_seq'),
    delivered_at  timestamptz NOT NULL,
    input         jsonb       NOT NULL,
    PRIMARY KEY (run_id, seq)
);

COMMENT ON TABLE runq.inputs IS
    'Inputs delivered to waiting runs by runq.submit or runq.deliver_input.';

COMMIT;
