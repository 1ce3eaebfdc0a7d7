-- Revert runq:domain_event_type from pg
-- (back to the event types of v0.1.3)

BEGIN;

SET LOCAL lock_timeout = '2s';

-- The usage ledger goes with the feature, as the totals go with their
-- columns (columns_runs_usage's revert): the event types of v0.1.3 have no
-- run.usage. Read through run_events_usage_idx, which is reverted after this.
DELETE FROM runq.run_events AS e WHERE e.type = 'run.usage';

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
