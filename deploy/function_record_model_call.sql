-- Deploy runq:function_record_model_call to pg
-- requires: table_model_calls
-- requires: function_record_usage
-- requires: function__refuse
-- requires: argument_checks
-- requires: argument_check_usage
-- requires: role_runq_worker
-- requires: role_runq_admin

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- Called by an agent loop after each model request it sent, with what the
-- model answered and what the request cost, in one transaction: a crash
-- before it commits loses both (the request is sent again, its spend was
-- never recorded), after it neither is lost.
--
-- The run's row is locked (NO KEY UPDATE, as runq.emit does) so the fence
-- read here still holds at commit: a row is applied only if its writer held
-- the run then, and a later claim comes after. A stale writer's row is kept
-- (applied false), as its usage is (runq.record_usage): the spend happened.
--
-- Idempotent per (run, seq, epoch): a resend after a lost connection finds
-- its row and records nothing twice, so a client need not ask what landed.
-- A request seq already applied under another epoch is refused (RQ004) from
-- a holder of the run: it should have been replayed. From a stale writer it
-- is kept as what it spent, not applied.
CREATE FUNCTION runq.record_model_call(run_id bigint, epoch bigint, seq bigint,
                                       request_hash text, response jsonb,
                                       usage jsonb DEFAULT NULL)
    RETURNS boolean
    LANGUAGE plpgsql
    VOLATILE
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_held    boolean;
    v_epoch   bigint;
    v_applied bigint;
    v_new     boolean;
    v_hash    text;
BEGIN
    -- Each check is true or raises 22023 naming the argument and its value
    -- (deploy/argument_checks).
    IF (CASE WHEN record_model_call.seq >= 1 THEN true
             ELSE runq._bad_argument('seq', 'at least 1', record_model_call.seq) END)
       AND (CASE WHEN record_model_call.request_hash <> '' AND length(record_model_call.request_hash) <= 256
                 THEN true
                 ELSE runq._bad_argument('request_hash', 'a non-empty text of at most 256 characters',
                                         left(record_model_call.request_hash, 300)) END)
       AND runq._check_jsonb('response', record_model_call.response)
       AND runq._check_usage('usage', record_model_call.usage, true)
       AND (CASE WHEN record_model_call.epoch IS NOT NULL THEN true
                 ELSE runq._bad_argument('epoch', 'given', record_model_call.epoch) END) THEN
    END IF;

    SELECT r.status = 'running' AND r.lease_epoch = record_model_call.epoch, r.lease_epoch::bigint
      INTO v_held, v_epoch
      FROM runq.runs AS r
     WHERE r.run_id = record_model_call.run_id
       FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        PERFORM runq._run_not_found(record_model_call.run_id);
    END IF;
    IF record_model_call.epoch NOT BETWEEN 1 AND v_epoch THEN
        PERFORM runq._bad_argument('epoch',
            CASE WHEN v_epoch = 0 THEN format('an epoch run %s was claimed with (it never was)',
                                              record_model_call.run_id)
                 ELSE format('an epoch run %s was claimed with, 1 to %s', record_model_call.run_id,
                             v_epoch) END,
            record_model_call.epoch);
    END IF;

    -- Request seq applied under another epoch is to be replayed, not sent:
    -- a caller that sent it again did not read the journal.
    SELECT m.epoch::bigint INTO v_applied
      FROM runq.model_calls AS m
     WHERE m.run_id = record_model_call.run_id AND m.seq = record_model_call.seq AND m.applied
       AND m.epoch <> record_model_call.epoch;
    IF FOUND AND v_held THEN
        RAISE EXCEPTION USING ERRCODE = 'RQ004',
            MESSAGE = format('model request %s of run %s was recorded under epoch %s already',
                             record_model_call.seq, record_model_call.run_id, v_applied),
            HINT = 'Replay the response runq.model_calls holds instead of sending the request again.';
    END IF;

    INSERT INTO runq.model_calls AS m (run_id, seq, epoch, applied, created_at, request_hash,
                                       response, usage)
    VALUES (record_model_call.run_id, record_model_call.seq, record_model_call.epoch, v_held,
            clock_timestamp(), record_model_call.request_hash, record_model_call.response,
            record_model_call.usage)
        ON CONFLICT ON CONSTRAINT model_calls_pkey DO NOTHING
    RETURNING true INTO v_new;
    IF v_new IS NULL THEN
        -- Sent before and committed: the same request, or the caller's bug.
        SELECT m.request_hash INTO v_hash
          FROM runq.model_calls AS m
         WHERE m.run_id = record_model_call.run_id AND m.seq = record_model_call.seq
           AND m.epoch = record_model_call.epoch;
        IF v_hash IS DISTINCT FROM record_model_call.request_hash THEN
            RAISE EXCEPTION USING ERRCODE = 'RQ004',
                MESSAGE = format('model request %s of run %s under epoch %s was recorded with'
                                 ' another request_hash (%s)', record_model_call.seq,
                                 record_model_call.run_id, record_model_call.epoch, v_hash),
                HINT = 'Number each request of an attempt once.';
        END IF;
    END IF;

    -- Refused first, so that the one run.fenced of this epoch names this call.
    IF NOT v_held THEN
        PERFORM runq._refuse(record_model_call.run_id, record_model_call.epoch,
                             'record_model_call', false);
    END IF;
    IF v_new AND record_model_call.usage IS NOT NULL THEN
        PERFORM runq.record_usage(record_model_call.run_id, record_model_call.epoch,
                                  record_model_call.usage);
    END IF;
    RETURN v_held;
END
$$;

REVOKE ALL ON FUNCTION runq.record_model_call(bigint, bigint, bigint, text, jsonb, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION runq.record_model_call(bigint, bigint, bigint, text, jsonb, jsonb)
    TO runq_worker, runq_admin;

COMMENT ON FUNCTION runq.record_model_call(bigint, bigint, bigint, text, jsonb, jsonb) IS
$c$Journals model request seq (1, 2, 3, ... in the order the run's loop sends them) of the run, sent under epoch: a hash of the request, the response, and its usage, which is added to the run's totals as runq.record_usage adds it, in the same transaction. true when the run is running under epoch (the row is applied: a later attempt replays the response instead of sending the request); false when fenced (the row and the usage are kept, not applied; one run.fenced). Not stopped by a cancel flag, a deadline or the budget: the spend happened. Sent again for the same run, seq and epoch, it records nothing twice.
Raises 22023 (NULL run_id, seq NULL or below 1, request_hash NULL, empty or over 256 characters, NULL response, usage that is not NULL or a non-empty object of non-negative numbers, NULL epoch or one the run never had), RQ003 (no such run), RQ004 (request seq was applied under another epoch, while the caller holds the run: replay it; or was recorded under this epoch with another request_hash).$c$;

COMMIT;
