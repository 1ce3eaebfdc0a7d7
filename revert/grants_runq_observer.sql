-- Revert runq:grants_runq_observer from pg

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

REVOKE SELECT ON runq.queue_stats, runq.limits, runq.pauses, runq.schedules FROM runq_observer;
REVOKE EXECUTE ON FUNCTION runq.get_run(bigint), runq.run_events(bigint),
    runq.tool_calls(bigint), runq.dead_letter(integer), runq.orphan_report(interval),
    runq.usage_report(timestamptz, timestamptz) FROM runq_observer;

COMMIT;
