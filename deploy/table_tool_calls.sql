-- Deploy runq:table_tool_calls to pg
-- requires: table_runs

BEGIN;

-- Tool invocations, written before the tool runs (begin_tool) and after
-- (end_tool). When a lease dies with a call still 'started', the call becomes
-- 'retryable' (read_only, idempotent) or 'uncertain' (non_idempotent): the
-- queue cannot know whether a non-idempotent effect happened, and says so.
CREATE TABLE runq.tool_calls (
    run_id       bigint      NOT NULL REFERENCES runq.runs (run_id),
    call_id      text        NOT NULL CHECK (call_id <> ''),
    epoch        bigint      NOT NULL,
    started_at   timestamptz NOT NULL,
    finished_at  timestamptz,
    tool         text        NOT NULL CHECK (tool <> ''),
    idempotency  text        NOT NULL
                 CHECK (idempotency IN ('read_only', 'idempotent', 'non_idempotent')),
    status       text        NOT NULL DEFAULT 'started'
                 CHECK (status IN ('started', 'finished', 'retryable', 'uncertain')),
    args         jsonb       NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(args) = 'object'),
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
