-- Revert runq:domain_event_type from pg
-- (back to the event types of v0.2.0)

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- The old rule goes back NOT VALID, as the new one came: the events of child
-- runs logged meanwhile stay (the log is history), for a deploy again to find
-- them.
ALTER DOMAIN runq.event_type DROP CONSTRAINT event_type_check;
ALTER DOMAIN runq.event_type ADD CONSTRAINT event_type_check CHECK (
    VALUE IN ('run.created', 'run.claimed', 'run.checkpointed',
              'run.turn_started', 'run.tool_started',
              'run.tool_finished', 'run.tool_uncertain',
              'run.waiting_for_user', 'run.input_delivered',
              'run.succeeded', 'run.failed', 'run.cancel_requested',
              'run.cancelled', 'run.requeued', 'run.fenced',
              'run.redriven', 'run.usage')) NOT VALID;

COMMIT;
