-- Revert runq:domain_event_type from pg
-- (back to the event types of v0.1.3)

BEGIN;

SET LOCAL lock_timeout = '2s';

-- The old rule goes back NOT VALID, as the new one came: run.usage events
-- recorded meanwhile (the ledger) stay, for a deploy again to find them.
ALTER DOMAIN runq.event_type DROP CONSTRAINT event_type_check;
ALTER DOMAIN runq.event_type ADD CONSTRAINT event_type_check CHECK (
    VALUE IN ('run.created', 'run.claimed', 'run.checkpointed',
              'run.turn_started', 'run.tool_started',
              'run.tool_finished', 'run.tool_uncertain',
              'run.waiting_for_user', 'run.input_delivered',
              'run.succeeded', 'run.failed', 'run.cancel_requested',
              'run.cancelled', 'run.requeued', 'run.fenced',
              'run.redriven')) NOT VALID;

COMMIT;
