-- Deploy runq:function_purge to pg
-- requires: table_runs
-- requires: table_run_events
-- requires: table_checkpoints
-- requires: table_inputs
-- requires: table_tool_calls
-- requires: table_idempotency_keys
-- requires: table_run_usage
-- requires: role_runq_admin
-- requires: argument_checks
-- requires: function_submit
-- requires: index_run_events_fenced
-- requires: table_run_output

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- Called by operators, on a timer, to keep runs from growing without end: runq
-- itself never deletes a run. One statement deletes a batch of old finished
-- runs with everything that hangs off them; callers repeat until it returns
-- fewer than max_runs, so no call holds locks or bloats WAL for long.
--
-- Candidates are walked in run_id order through runs_pkey, not through an
-- index on finished_at: such an index would cost every complete an index
-- write, and old runs are the low run_ids anyway. The price: a call that
-- finds fewer than max_runs has walked every run it keeps. Rows are taken
-- FOR UPDATE SKIP LOCKED, so purges on several sessions split the work, and a
-- failed run being redriven is left alone. The children go first in the same
-- statement: the foreign keys into runs are NO ACTION, checked at its end,
-- but for the watches' and the model calls' (runq.model_calls), which cascade.
--
-- Two paths can meet a run while it is purged. A submit repeating its
-- idempotency key: submit takes a key purged between its insert and its
-- read again (deploy/function_submit.sql). A stale worker's write, which
-- logs run.fenced: run_events has no foreign key (a hot-path cost), so
-- such an event can commit after its run is gone; each purge also deletes
-- those orphans, found through the small run_events_fenced_key, rather
-- than make the fenced path lock the run.
-- Raises 22023 for bad arguments.
--
-- The arguments are checked by the shared checks of argument_checks.
--
-- A run's usage totals (runq.run_usage) go with it.
-- So does its output (runq.run_output): runq.emit writes only to a running
-- run, which this never takes; its watches and its journaled model calls go
-- by their foreign keys' cascade.
-- runq.record_usage reads the run FOR KEY SHARE, so a purge skips a run
-- whose usage is being recorded, and a record that waits for a purge finds
-- no run (RQ003) instead of adding a row the purge did not see.
CREATE OR REPLACE FUNCTION runq.purge(
    older_than     interval,
    max_runs       integer DEFAULT 1000,
    include_failed boolean DEFAULT false)
    RETURNS bigint
    LANGUAGE plpgsql
    VOLATILE
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_purged bigint;
    v_cutoff timestamptz;
BEGIN
    -- Each check is true or raises 22023 naming the argument and its value
    -- (deploy/argument_checks). An IF runs them as one expression; a PERFORM
    -- would run them as a statement of its own.
    -- older_than may be 0 (everything finished so far), unlike a duration.
    IF (CASE WHEN purge.older_than >= interval '0' AND purge.older_than < interval '1000 years'
                THEN true
                ELSE runq._bad_argument('older_than', 'at least 0 and under 1000 years',
                                        purge.older_than) END)
       AND runq._check_count('max_runs', purge.max_runs)
       AND (CASE WHEN purge.include_failed IS NOT NULL THEN true
                ELSE runq._bad_argument('include_failed', 'true or false', purge.include_failed) END) THEN
    END IF;
    v_cutoff := clock_timestamp() - purge.older_than;

    WITH doomed AS (
        SELECT r.run_id
          FROM runq.runs AS r
         WHERE (r.status IN ('succeeded', 'cancelled')
                OR purge.include_failed AND r.status = 'failed')
           AND r.finished_at < v_cutoff
         ORDER BY r.run_id
         LIMIT purge.max_runs
           FOR UPDATE SKIP LOCKED
    ), events AS (
        -- = ANY of an array, not a join: a join to the batch would be
        -- planned as a hash join over the whole event log.
        DELETE FROM runq.run_events AS e WHERE e.run_id = ANY (ARRAY(SELECT d.run_id FROM doomed AS d))
    ), checkpoints AS (
        DELETE FROM runq.checkpoints AS c WHERE c.run_id = ANY (ARRAY(SELECT d.run_id FROM doomed AS d))
    ), inputs AS (
        DELETE FROM runq.inputs AS i WHERE i.run_id = ANY (ARRAY(SELECT d.run_id FROM doomed AS d))
    ), tool_calls AS (
        DELETE FROM runq.tool_calls AS t WHERE t.run_id = ANY (ARRAY(SELECT d.run_id FROM doomed AS d))
    ), usage_totals AS (
        DELETE FROM runq.run_usage AS u WHERE u.run_id = ANY (ARRAY(SELECT d.run_id FROM doomed AS d))
    ), output AS (
        DELETE FROM runq.run_output AS o WHERE o.run_id = ANY (ARRAY(SELECT d.run_id FROM doomed AS d))
    ), idempotency_keys AS (
        DELETE FROM runq.idempotency_keys AS k
         WHERE k.run_id = ANY (ARRAY(SELECT d.run_id FROM doomed AS d))
    ), orphans AS (
        DELETE FROM runq.run_events AS e
         WHERE e.type = 'run.fenced'
           AND NOT EXISTS (SELECT FROM runq.runs AS r WHERE r.run_id = e.run_id)
    ), runs AS (
        DELETE FROM runq.runs AS r WHERE r.run_id = ANY (ARRAY(SELECT d.run_id FROM doomed AS d))
        RETURNING r.run_id
    )
    SELECT count(*) INTO v_purged FROM runs;
    RETURN v_purged;
END
$$;

REVOKE ALL ON FUNCTION runq.purge(interval, integer, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION runq.purge(interval, integer, boolean) TO runq_admin;

COMMENT ON FUNCTION runq.purge(interval, integer, boolean) IS
$c$Delete up to max_runs runs that finished more than older_than ago (succeeded and cancelled; failed too when include_failed, else the dead letter stays), lowest run_id (earliest submitted) first, with their events, usage totals, output, watches, checkpoints, inputs, tool calls, model calls and idempotency keys (a later submit with a purged key creates a new run). Returns how many runs it deleted: call it again until it returns fewer than max_runs. Runs locked by another session are skipped. A run.fenced event that a stale worker logs while its run is purged is deleted by the next purge.
Raises 22023 (older_than NULL, negative or 1000 years or more, max_runs NULL or below 1, NULL include_failed).$c$;

COMMIT;
