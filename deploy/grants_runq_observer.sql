-- Deploy runq:grants_runq_observer to pg
-- requires: role_runq_observer
-- requires: function_get_run
-- requires: function_run_events
-- requires: function_tool_calls
-- requires: function_dead_letter
-- requires: function_orphan_report
-- requires: function_usage_report
-- requires: view_queue_stats
-- requires: view_limits
-- requires: view_pauses
-- requires: view_schedules

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- What runq_observer reads that older changes created. Every function here
-- is STABLE and every view a plain SELECT: nothing it is granted can write.
-- A GRANT on a function takes no lock a caller waits on; on a view, a short
-- one on the view alone.
GRANT EXECUTE ON FUNCTION runq.get_run(bigint), runq.run_events(bigint),
    runq.tool_calls(bigint), runq.dead_letter(integer), runq.orphan_report(interval),
    runq.usage_report(timestamptz, timestamptz) TO runq_observer;
GRANT SELECT ON runq.queue_stats, runq.limits, runq.pauses, runq.schedules TO runq_observer;

COMMIT;
