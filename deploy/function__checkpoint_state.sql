-- Deploy runq:function__checkpoint_state to pg
-- requires: table_checkpoints

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- Called by runq.claim for a resumed run, from inside its claiming statement.
-- VOLATILE, so that its SELECT takes a snapshot of its own, after the claim
-- has locked the run (its SET clause keeps it from being inlined into the
-- claiming statement): the claiming statement's snapshot may predate a checkpoint written just before the row lock was taken.
CREATE FUNCTION runq._checkpoint_state(run_id bigint, seq bigint)
    RETURNS jsonb
    LANGUAGE sql
    VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
    SELECT k.state FROM runq.checkpoints AS k
     WHERE k.run_id = _checkpoint_state.run_id AND k.seq = _checkpoint_state.seq
$$;

REVOKE ALL ON FUNCTION runq._checkpoint_state(bigint, bigint) FROM PUBLIC;

COMMENT ON FUNCTION runq._checkpoint_state(bigint, bigint) IS
    'Internal: the state of the run''s checkpoint seq (NULL if none), read with a fresh snapshot.';

COMMIT;
