-- Deploy runq:table_runs to pg
-- requires: schema_runq
-- requires: domain_identifier
-- requires: domain_run_status
-- requires: domain_recovery_policy
-- requires: domain_priority_class
-- requires: domain_counter
-- requires: domain_attempt_limit
-- requires: domain_epoch
-- requires: domain_duration
-- requires: domain_json_object
-- requires: domain_failure_record

BEGIN;

-- One row per run, for its whole life: the dead letter is status 'failed' in
-- this same table. Claim, heartbeat and complete rewrite this row millions of
-- times, so it is laid out for them:
--   * fixed-width columns first, widest first, so no alignment padding;
--   * a heartbeat changes only heartbeat_at and lease_expires_at, which no
--     index covers, so heartbeats are HOT updates (no index writes);
--   * every column a contract rule needs exists from the first migration:
--     a fencing token cannot be retrofitted onto runs already in flight;
--   * a column's own rule is its domain's (runq.run_status, ...), checked
--     only when the column is written; the table CHECKs are the few rules
--     that tie columns together, which every write must pay for.
CREATE TABLE runq.runs (
    run_id            bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    lease_epoch       runq.epoch  NOT NULL DEFAULT 0,
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
    lease             runq.duration,
    queue_ttl         runq.duration,
    -- Counts of one run (bounded by max_attempts, or one per model or tool
    -- call): integers, as runq.submit takes max_attempts (the contract).
    attempts          runq.counter         NOT NULL DEFAULT 0,
    max_attempts      runq.attempt_limit   NOT NULL DEFAULT 3,
    turns             runq.counter         NOT NULL DEFAULT 0,
    tools_begun       runq.counter         NOT NULL DEFAULT 0,
    priority          runq.priority_class  NOT NULL,
    cancel_requested  boolean              NOT NULL DEFAULT false,
    status            runq.run_status      NOT NULL DEFAULT 'queued',
    recovery_policy   runq.recovery_policy NOT NULL DEFAULT 'resume',
    tenant_id         runq.identifier      NOT NULL,
    session_id        runq.identifier,
    kind              runq.identifier      NOT NULL,
    principal_id      text,
    lease_owner       text,
    payload           runq.json_object     NOT NULL DEFAULT '{}',
    result            jsonb,
    failure           runq.failure_record,
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
