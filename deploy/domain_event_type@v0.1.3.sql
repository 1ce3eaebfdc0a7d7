-- Deploy runq:domain_event_type to pg
-- requires: schema_runq

BEGIN;

-- A domain, not a table CHECK: its check runs only when a value of it is
-- assigned, and from a cached expression. Table CHECKs are rebuilt from
-- their stored text by every UPDATE and run on every row written, so they
-- cost the hot path (a heartbeat changes none of these columns). The price
-- squawk warns of: changing this rule later (ALTER DOMAIN) checks every
-- column of the domain under lock; a later change adds a new domain instead.
-- squawk-ignore ban-create-domain-with-constraint
CREATE DOMAIN runq.event_type AS text CHECK (
    VALUE IN ('run.created', 'run.claimed', 'run.checkpointed',
              'run.turn_started', 'run.tool_started',
              'run.tool_finished', 'run.tool_uncertain',
              'run.waiting_for_user', 'run.input_delivered',
              'run.succeeded', 'run.failed', 'run.cancel_requested',
              'run.cancelled', 'run.requeued', 'run.fenced',
              'run.redriven'));

COMMENT ON DOMAIN runq.event_type IS
    'The type of a run event.';

COMMIT;
