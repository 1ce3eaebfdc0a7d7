-- Deploy runq:domain_run_shape to pg
-- requires: schema_runq

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- The five invariants that tie a run's status to its other columns, as the
-- constraints of a domain over the run's "shape": its status and which of the
-- status-dependent columns are set. runq.runs checks every row it writes by
-- casting its shape to this domain (change runs_shape_check).
--
-- Why a domain and not five table CHECKs: PostgreSQL 15 rebuilds every table
-- CHECK from its stored text in every UPDATE statement (parse, plan, compile),
-- about 14 us per UPDATE for these five, on every claim, heartbeat and
-- completion. A domain's constraints are parsed and planned once per session
-- and kept in the type cache. The shape holds booleans, not the columns'
-- values, so that building it never reads a TOASTed payload, result or
-- question.
CREATE TYPE runq.run_shape AS (
    status               text,
    lease_expires_at_set boolean,
    lease_set            boolean,
    finished_at_set      boolean,
    failure_set          boolean,
    question_set         boolean,
    queue_ttl_set        boolean,
    expires_at_set       boolean
);

COMMENT ON TYPE runq.run_shape IS
    'A run''s status and which of its status-dependent columns are set: what runq.consistent_run_shape checks.';

CREATE DOMAIN runq.consistent_run_shape AS runq.run_shape
    -- The price squawk warns of (changing a domain's rule later checks every
    -- column of that domain under lock) does not apply: no column is of this
    -- domain, only the CHECK runs_shape_consistent casts to it, so ALTER
    -- DOMAIN scans nothing.
    -- squawk-ignore ban-create-domain-with-constraint
    CONSTRAINT runs_leased_iff_running
        CHECK (((VALUE).status = 'running') = ((VALUE).lease_expires_at_set AND (VALUE).lease_set))
    CONSTRAINT runs_finished_iff_terminal
        CHECK (((VALUE).status IN ('succeeded', 'failed', 'cancelled')) = (VALUE).finished_at_set)
    CONSTRAINT runs_failure_iff_failed
        CHECK (((VALUE).status = 'failed') = (VALUE).failure_set)
    CONSTRAINT runs_question_iff_waiting
        CHECK (((VALUE).status = 'waiting_for_user') = (VALUE).question_set)
    CONSTRAINT runs_expires_with_ttl
        CHECK ((VALUE).queue_ttl_set = (VALUE).expires_at_set);

COMMENT ON DOMAIN runq.consistent_run_shape IS
    'The state machine''s invariants: leased iff running, finished_at iff terminal, failure iff failed, question iff waiting_for_user, expires_at iff queue_ttl.';

COMMIT;
