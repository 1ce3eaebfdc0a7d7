-- Deploy runq:table_tool_calls to pg
-- requires: table_runs
-- requires: domain_identifier
-- requires: domain_epoch
-- requires: domain_tool_idempotency
-- requires: domain_tool_call_status
-- requires: domain_json_object

BEGIN;

-- Tool invocations, written before the tool runs (begin_tool) and after
-- (end_tool). When a lease dies with a call still 'started', the call becomes
-- 'retryable' (read_only, idempotent) or 'uncertain' (non_idempotent): the
-- queue cannot know whether a non-idempotent effect happened, and says so.
CREATE TABLE runq.tool_calls (
    run_id       bigint      NOT NULL REFERENCES runq.runs (run_id),
    call_id      runq.identifier       NOT NULL,
    epoch        runq.epoch            NOT NULL,
    started_at   timestamptz NOT NULL,
    finished_at  timestamptz,
    tool         runq.identifier       NOT NULL,
    idempotency  runq.tool_idempotency NOT NULL,
    status       runq.tool_call_status NOT NULL DEFAULT 'started',
    args         runq.json_object      NOT NULL DEFAULT '{}',
    outcome      jsonb,
    PRIMARY KEY (run_id, call_id),
    CONSTRAINT tool_calls_finished_iff_outcome
        CHECK ((status = 'finished') = (finished_at IS NOT NULL AND outcome IS NOT NULL)),
    CONSTRAINT tool_calls_uncertain_only_non_idempotent
        CHECK (status <> 'uncertain' OR idempotency = 'non_idempotent')
);

COMMENT ON TABLE runq.tool_calls IS
    'One row per tool call of a run, with its idempotency class and what became of it.';

COMMIT;
