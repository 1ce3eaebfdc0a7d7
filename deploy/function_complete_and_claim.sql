-- Deploy runq:function_complete_and_claim to pg
-- requires: type_completed_and_claimed
-- requires: function_complete
-- requires: function_claim
-- requires: argument_checks
-- requires: role_runq_worker
-- requires: role_runq_admin

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- Called by workers: a run finished and the next taken in one round trip and
-- one transaction, where runq.complete then runq.claim take two of each.
-- It is those two calls, in that order, so each rule is theirs: the
-- completion is fenced as complete's (false, one run.fenced), a slot it
-- frees under a limit is handed on before the claim looks, and the claim
-- takes what claim would. A fenced completion claims nothing unless
-- claim_if_fenced: a worker that lost a run may have lost its lease to a
-- pause of its whole process, and is asked to look before it takes more.
-- A NULL run_id and epoch complete nothing (a worker loop's first call).
-- The claim's arguments are tested first, so a bad one changes nothing.
CREATE FUNCTION runq.complete_and_claim(
    run_id          bigint,
    epoch           bigint,
    result          jsonb,
    classes         integer[],
    worker_id       text     DEFAULT NULL,
    lease           interval DEFAULT NULL,
    max_runs        integer  DEFAULT 1,
    kinds           text[]   DEFAULT NULL,
    claim_if_fenced boolean  DEFAULT false)
    RETURNS SETOF runq.completed_and_claimed
    LANGUAGE plpgsql
    VOLATILE
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_completed boolean;
    v_none      runq.completed_and_claimed;
BEGIN
    IF NOT coalesce(runq._is_classes(complete_and_claim.classes)
                    AND runq._is_count(complete_and_claim.max_runs)
                    AND runq._is_duration(complete_and_claim.lease)
                    AND (complete_and_claim.kinds IS NULL OR runq._is_names(complete_and_claim.kinds)),
                    false) THEN
        PERFORM runq._check_classes('classes', complete_and_claim.classes)
            AND runq._check_count('max_runs', complete_and_claim.max_runs)
            AND runq._check_duration('lease', complete_and_claim.lease)
            AND (complete_and_claim.kinds IS NULL
                 OR runq._check_names('kinds', complete_and_claim.kinds));
    END IF;
    -- One of the two NULL: complete raises 22023 naming it.
    IF complete_and_claim.run_id IS NOT NULL OR complete_and_claim.epoch IS NOT NULL THEN
        v_completed := runq.complete(complete_and_claim.run_id, complete_and_claim.epoch,
                                     complete_and_claim.result);
    END IF;
    IF v_completed OR v_completed IS NULL OR coalesce(complete_and_claim.claim_if_fenced, false) THEN
        RETURN QUERY
            SELECT v_completed, c.*
              FROM runq.claim(complete_and_claim.classes, complete_and_claim.worker_id,
                              complete_and_claim.lease, complete_and_claim.max_runs,
                              complete_and_claim.kinds) AS c;
        IF FOUND THEN
            RETURN;
        END IF;
    END IF;
    -- Nothing claimed: one row all the same, to say what the completion did.
    v_none.completed := v_completed;
    RETURN NEXT v_none;
END
$$;

REVOKE ALL ON FUNCTION runq.complete_and_claim(bigint, bigint, jsonb, integer[], text, interval, integer, text[], boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION runq.complete_and_claim(bigint, bigint, jsonb, integer[], text, interval, integer, text[], boolean)
    TO runq_worker, runq_admin;

COMMENT ON FUNCTION runq.complete_and_claim(bigint, bigint, jsonb, integer[], text, interval, integer, text[], boolean) IS
$c$runq.complete then runq.claim in one call and one transaction: the run run_id, held under epoch, succeeds with result, then up to max_runs runs of classes (and kinds) are claimed with worker_id and lease, as runq.claim claims them. One row per claimed run: completed (what runq.complete answered: true, or false when fenced, with one run.fenced), then runq.claim's columns. A fenced completion claims nothing unless claim_if_fenced. When nothing is claimed, one row: completed, and NULL in every other column. A NULL run_id and epoch complete nothing (completed NULL) and only claim.
Raises 22023 (the claim's arguments, as runq.claim; run_id or epoch NULL without the other), RQ003 (no such run); then nothing changes.$c$;

COMMIT;
