-- Deploy runq:table_run_events to pg
-- requires: table_runs
-- requires: domain_epoch
-- requires: domain_event_type
-- requires: domain_json_object

BEGIN;

-- The event log: one row per transition, written in the transaction of the
-- transition itself. Keyed (run_id, event_id) so one index serves both the
-- insert (event_id comes from the identity sequence, so it is unique) and
-- reading a run's timeline in order.
--
-- No foreign key to runq.runs, on purpose: every insert comes from a runq
-- function in the same statement or transaction as a write that proves the
-- run exists, and an RI check would add a query and a row lock to every
-- claim and complete. Runs are never deleted by runq.
CREATE TABLE runq.run_events (
    run_id      bigint      NOT NULL,
    event_id    bigint      GENERATED ALWAYS AS IDENTITY,
    epoch       runq.epoch       NOT NULL,
    created_at  timestamptz      NOT NULL,
    type        runq.event_type  NOT NULL,
    payload     runq.json_object NOT NULL DEFAULT '{}',
    PRIMARY KEY (run_id, event_id)
);

COMMENT ON TABLE runq.run_events IS
    'Append-only log of every run transition, written in the same transaction as the transition.';
COMMENT ON COLUMN runq.run_events.epoch IS
    'The lease epoch the event belongs to: the writer''s for worker events, the run''s for queue events.';

COMMIT;
