-- Deploy runq:table_runs to pg
-- requires: schema_runq

BEGIN;

-- One row per run, for its whole life: the dead letter is status 'failed' in
-- this same table. Claim, heartbeat and complete rewrite this row millions of
-- times, so it is laid out for them:
--   * fixed-width columns first, widest first, so no alignment padding;
--   * a heartbeat changes only heartbeat_at and lease_expires_at, which no
--     index covers, so heartbeats are HOT updates (no index writes);
--   * every column a contract rule needs exists from the first migration:
--     a fencing token cannot be retrofitted onto runs already in flight.
CREATE TABLE runq.runs (
    run_id            bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    lease_epoch       bigint      NOT NULL DEFAULT 0 CHECK (lease_epoch >= 0),
    last_checkpoint   bigint,
    created_at        timestamptz NOT NULL,
    updated_at        timestamptz NOT NULL,
    scheduled_for     timestamptz,
    -- When the run may be claimed: age order for ordinary runs, the delay for
    -- scheduled and backed-off ones. Claiming walks (priority, ready_at) and
    -- stops at the first future run, so delayed runs never cost a claim.
    ready_at          timestamptz NOT NULL GENERATED ALWAYS AS (coalesce(scheduled_for, created_at)) STORED,
    -- created_at + queue_ttl, fixed at submit (timestamptz + interval is not
    -- immutable, so it cannot be a generated column or an index expression).
    expires_at        timestamptz,
    heartbeat_at      timestamptz,
    lease_expires_at  timestamptz,
    finished_at       timestamptz,
    lease             interval    CHECK (lease > interval '0'),
    queue_ttl         interval    CHECK (queue_ttl > interval '0'),
    -- A claim adds 1 only up to max_attempts (then the sweep dead-letters the
    -- run), and input delivery and redrive reset it: bounded by max_attempts,
    -- an integer argument of runq.submit.
    -- squawk-ignore prefer-bigint-over-int
    attempts          integer     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    -- runq.submit takes max_attempts as integer (the contract).
    -- squawk-ignore prefer-bigint-over-int
    max_attempts      integer     NOT NULL DEFAULT 3 CHECK (max_attempts >= 1),
    -- One per chargeable model call of one run: 2^31 of them is out of reach,
    -- and an overflow would raise in begin_turn, never wrap.
    -- squawk-ignore prefer-bigint-over-int
    turns             integer     NOT NULL DEFAULT 0 CHECK (turns >= 0),
    -- One per tool call of one run; bounded like turns.
    -- squawk-ignore prefer-bigint-over-int
    tools_begun       integer     NOT NULL DEFAULT 0 CHECK (tools_begun >= 0),
    -- The contract fixes classes as smallint values 0..32767 (submit checks).
    -- squawk-ignore prefer-bigint-over-smallint
    priority          smallint    NOT NULL CHECK (priority >= 0),
    cancel_requested  boolean     NOT NULL DEFAULT false,
    status            text        NOT NULL DEFAULT 'queued'
                      CHECK (status IN ('queued', 'running', 'waiting_for_user',
                                        'succeeded', 'failed', 'cancelled')),
    recovery_policy   text        NOT NULL DEFAULT 'resume'
                      CHECK (recovery_policy IN ('resume', 'fail', 'zero_work')),
    tenant_id         text        NOT NULL CHECK (tenant_id <> ''),
    session_id        text        CHECK (session_id <> ''),
    kind              text        NOT NULL CHECK (kind <> ''),
    principal_id      text,
    lease_owner       text,
    payload           jsonb       NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(payload) = 'object'),
    result            jsonb,
    -- The dead letter's reason: an object with a string code and message.
    -- coalesce, because a missing key makes the test NULL, which a CHECK passes.
    failure           jsonb       CHECK (coalesce(jsonb_typeof(failure -> 'code') = 'string'
                                                  AND jsonb_typeof(failure -> 'message') = 'string',
                                                  failure IS NULL)),
    question          jsonb,

    -- The state machine's invariants, so that no bug in a function can store
    -- a run that contradicts its status.
    CONSTRAINT runs_leased_iff_running
        CHECK ((status = 'running') = (lease_expires_at IS NOT NULL AND lease IS NOT NULL)),
    CONSTRAINT runs_finished_iff_terminal
        CHECK ((status IN ('succeeded', 'failed', 'cancelled')) = (finished_at IS NOT NULL)),
    CONSTRAINT runs_failure_iff_failed
        CHECK ((status = 'failed') = (failure IS NOT NULL)),
    CONSTRAINT runs_question_iff_waiting
        CHECK ((status = 'waiting_for_user') = (question IS NOT NULL)),
    CONSTRAINT runs_expires_with_ttl
        CHECK ((queue_ttl IS NULL) = (expires_at IS NULL))
);

COMMENT ON TABLE runq.runs IS
    'Every run, from submit to its terminal status; failed runs are the dead letter and stay here.';
COMMENT ON COLUMN runq.runs.lease_epoch IS
    'The fencing token: +1 on every claim; a worker write applies only under the epoch it was claimed with.';
COMMENT ON COLUMN runq.runs.last_checkpoint IS
    'runq.checkpoints.seq of the newest checkpoint, so a claim finds it with one key lookup.';
COMMENT ON COLUMN runq.runs.ready_at IS
    'coalesce(scheduled_for, created_at): the claim order within a priority class.';
COMMENT ON COLUMN runq.runs.expires_at IS
    'created_at + queue_ttl: a queued run still waiting then fails with queue_ttl_expired.';
COMMENT ON COLUMN runq.runs.turns IS
    'begin_turn calls over the run''s whole life; with tools_begun it decides zero work.';
COMMENT ON COLUMN runq.runs.tools_begun IS
    'begin_tool calls over the run''s whole life; with turns it decides zero work.';
COMMENT ON COLUMN runq.runs.lease IS
    'Lease length of the current or last claim; a heartbeat extends the lease by it.';

COMMIT;
