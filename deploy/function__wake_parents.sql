-- Deploy runq:function__wake_parents to pg
-- requires: columns_runs_parent
-- requires: index_runs_live_children
-- requires: domain_event_type
-- requires: domain_run_status
-- requires: admission
-- requires: function__cancel_children

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- Called in the transaction that gave child runs a terminal status, with
-- their parents, by the functions that end runs (only for runs that have a
-- parent). A parent waiting for its children whose last live child this was
-- goes back to the queue (run.children_done), attempts reset as input
-- delivery resets them, admitted as a run back from waiting is, and a
-- worker is woken.
--
-- Exactly once, whatever the interleaving: the parent is locked before its
-- children are counted, in a statement of its own, so that of two children
-- ending at once the second to lock sees the first's end (READ COMMITTED
-- takes a new snapshot for each statement), and the first sees the second
-- still live. runq.wait_children closes the other race (a child ending while
-- its parent starts to wait) from its side. A parent not waiting is not
-- locked: a running parent that ends locks its children (runq._cancel_children),
-- and this order, child then parent, is taken only towards a waiting one.
CREATE FUNCTION runq._wake_parents(parents bigint[], at timestamptz)
    RETURNS void
    LANGUAGE plpgsql
    VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_waiting bigint[];
    v_done    bigint[];
BEGIN
    SELECT array_agg(r.run_id ORDER BY r.run_id) INTO v_waiting
      FROM runq.runs AS r
     WHERE r.run_id = ANY (_wake_parents.parents)
       AND r.status = 'waiting_for_children';
    IF v_waiting IS NULL THEN
        RETURN;
    END IF;

    SELECT array_agg(r.run_id ORDER BY r.run_id) INTO v_waiting
      FROM (SELECT r.run_id
              FROM runq.runs AS r
             WHERE r.run_id = ANY (v_waiting) AND r.status = 'waiting_for_children'
             ORDER BY r.run_id
               FOR NO KEY UPDATE) AS r;

    WITH requeued AS (
        UPDATE runq.runs AS r
           SET status = 'queued', attempts = 0, updated_at = at
         WHERE r.run_id = ANY (v_waiting)
           AND NOT EXISTS (SELECT FROM runq.runs AS c
                            WHERE c.parent_run_id = r.run_id AND c.parent_run_id IS NOT NULL
                              AND c.status IN ('queued', 'running', 'waiting_for_user',
                                               'waiting_for_children'))
        RETURNING r.run_id, r.lease_epoch
    ), logged AS (
        INSERT INTO runq.run_events (run_id, epoch, type, payload, created_at)
        SELECT q.run_id, q.lease_epoch, 'run.children_done', '{}', at
          FROM requeued AS q
    )
    SELECT array_agg(q.run_id) INTO v_done FROM requeued AS q;
    IF v_done IS NOT NULL THEN
        -- Back from waiting, each needs admitting when limits or pauses are
        -- set (deploy/admission.sql).
        PERFORM runq._requeued(d.run_id, false) FROM unnest(v_done) AS d (run_id);
        PERFORM pg_notify('runq', '');
    END IF;
END
$$;

-- What every function that ends runs calls, only when one of them has a
-- family: the children of those that spawned (spawned) are cancelled, then
-- the parents of those that are children (parents) may wake.
CREATE FUNCTION runq._family_ended(spawned bigint[], parents bigint[], at timestamptz)
    RETURNS void
    LANGUAGE plpgsql
    VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF _family_ended.spawned IS NOT NULL THEN
        PERFORM runq._cancel_children(_family_ended.spawned, _family_ended.at);
    END IF;
    IF _family_ended.parents IS NOT NULL THEN
        PERFORM runq._wake_parents(_family_ended.parents, _family_ended.at);
    END IF;
END
$$;

REVOKE ALL ON FUNCTION runq._wake_parents(bigint[], timestamptz),
                       runq._family_ended(bigint[], bigint[], timestamptz) FROM PUBLIC;

COMMENT ON FUNCTION runq._wake_parents(bigint[], timestamptz) IS
    'Internal: queues again (run.children_done, attempts reset) each of these parents that waits for its children and has none left that is not terminal.';
COMMENT ON FUNCTION runq._family_ended(bigint[], bigint[], timestamptz) IS
    'Internal: after runs ended, cancels the live children of those that spawned (runq._cancel_children), then wakes their parents (runq._wake_parents); NULL arrays: nothing to do.';

COMMIT;
