-- Deploy runq:function__inputs_after to pg
-- requires: table_inputs

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- Called by runq.claim for a resumed run, from inside its claiming statement.
-- VOLATILE, so that its SELECT takes a snapshot of its own, after the claim
-- has locked the run (its SET clause keeps it from being inlined into the
-- claiming statement): the claiming statement's snapshot may predate an input delivered just before the row lock was taken.
CREATE FUNCTION runq._inputs_after(run_id bigint, seq bigint)
    RETURNS jsonb
    LANGUAGE sql
    VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
    SELECT coalesce(jsonb_agg(i.input ORDER BY i.seq), '[]') FROM runq.inputs AS i
     WHERE i.run_id = _inputs_after.run_id AND i.seq > coalesce(_inputs_after.seq, 0)
$$;

REVOKE ALL ON FUNCTION runq._inputs_after(bigint, bigint) FROM PUBLIC;

COMMENT ON FUNCTION runq._inputs_after(bigint, bigint) IS
    'Internal: the inputs delivered to the run after its checkpoint seq (all if NULL), oldest first, as a JSON array, read with a fresh snapshot.';

COMMIT;
