-- Deploy runq:function__answer_batch to pg
-- requires: function__refuse
-- requires: function__check_batch

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- The answer of a batched worker call (heartbeat_many, complete_many) once its
-- fenced update has run: matched holds the run_ids it applied to. When every
-- element matched (the common case), each is true and no argument rule needs
-- checking, since a bad batch (a NULL or repeated element, arrays of other
-- lengths) cannot match every element. Otherwise the batch is checked, and
-- the elements that did not match are answered by runq._refuse, in order, as
-- the single call answers them: RQ003 for a run that does not exist (which
-- undoes the whole call), cancellation, or one run.fenced.
CREATE FUNCTION runq._answer_batch(run_ids bigint[], epochs bigint[], results jsonb[],
                                   matched bigint[], operation text, honours_cancel boolean)
    RETURNS TABLE(run_id bigint, applied boolean)
    LANGUAGE plpgsql
    VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    IF cardinality(matched) = cardinality(_answer_batch.run_ids)
       AND cardinality(_answer_batch.epochs) = cardinality(_answer_batch.run_ids)
       AND coalesce(cardinality(results) = cardinality(_answer_batch.run_ids), true)
       AND array_ndims(_answer_batch.run_ids) = 1 AND array_ndims(_answer_batch.epochs) = 1
       AND coalesce(array_ndims(results) = 1, true) THEN
        RETURN QUERY SELECT b.run_id, true FROM unnest(_answer_batch.run_ids) AS b(run_id);
        RETURN;
    END IF;
    IF runq._check_batch(_answer_batch.run_ids, _answer_batch.epochs, results) THEN
    END IF;
    RETURN QUERY
        SELECT b.run_id,
               CASE WHEN m.run_id IS NOT NULL THEN true
                    ELSE runq._refuse(b.run_id, b.epoch, operation, honours_cancel) END
          FROM unnest(_answer_batch.run_ids, _answer_batch.epochs) WITH ORDINALITY AS b(run_id, epoch, n)
          LEFT JOIN unnest(matched) AS m(run_id) ON m.run_id = b.run_id
         ORDER BY b.n;
END
$$;

REVOKE ALL ON FUNCTION runq._answer_batch(bigint[], bigint[], jsonb[], bigint[], text, boolean) FROM PUBLIC;

COMMENT ON FUNCTION runq._answer_batch(bigint[], bigint[], jsonb[], bigint[], text, boolean) IS
    'Internal: the rows of a batched worker call whose fenced update applied to matched: true for those, and for the rest what runq._refuse answers, after runq._check_batch.';

COMMIT;
