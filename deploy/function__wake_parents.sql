-- Deploy runq:function__wake_parents to pg
-- requires: columns_runs_parent
-- requires: domain_event_type
-- requires: domain_run_status
-- requires: admission
-- requires: function__cancel_children

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- Called in the transaction that gave child runs a terminal status, with
-- their parents (a parent once per child that ended), by the functions that
-- end runs (only for runs that have a parent). A parent waiting for its
-- children counts down (runs.waiting_on); the one whose count reaches 0
-- goes back to the queue (run.children_done), attempts reset as input
-- delivery resets them, admitted as a run back from waiting is, and a worker
-- is woken.
--
-- Exactly once, whatever the interleaving: the count is taken down under
-- the parent's row lock, so of two children ending at once the second to
-- lock sees the first's count. runq.wait_children closes the other race (a
-- child ending while its parent starts to wait) from its side. A parent not
-- was locked already, before the child (runq._lock_parents).
CREATE FUNCTION runq._wake_parents(parents bigint[], at timestamptz)
    RETURNS void
    LANGUAGE plpgsql
    VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_done bigint[];
BEGIN
    IF NOT EXISTS (SELECT FROM runq.runs AS r
                    WHERE r.run_id = ANY (_wake_parents.parents)
                      AND r.status = 'waiting_for_children') THEN
        RETURN;
    END IF;

    -- Locked in run_id order (the UPDATE below would lock them in any).
    PERFORM FROM runq.runs AS r
     WHERE r.run_id = ANY (_wake_parents.parents) AND r.status = 'waiting_for_children'
     ORDER BY r.run_id
       FOR NO KEY UPDATE;

    WITH ended AS (
        SELECT p.run_id, count(*) AS n
          FROM unnest(_wake_parents.parents) AS p (run_id)
         GROUP BY p.run_id
    ), counted AS (
        UPDATE runq.runs AS r
           SET waiting_on = CASE WHEN r.waiting_on > e.n THEN r.waiting_on - e.n END,
               status = CASE WHEN r.waiting_on > e.n THEN r.status ELSE 'queued' END,
               attempts = CASE WHEN r.waiting_on > e.n THEN r.attempts ELSE 0 END,
               updated_at = at
          FROM ended AS e
         WHERE r.run_id = e.run_id AND r.status = 'waiting_for_children'
        RETURNING r.run_id, r.lease_epoch, r.status
    ), logged AS (
        INSERT INTO runq.run_events (run_id, epoch, type, payload, created_at)
        SELECT c.run_id, c.lease_epoch, 'run.children_done', '{}', at
          FROM counted AS c
         WHERE c.status = 'queued'
    )
    SELECT array_agg(c.run_id) INTO v_done FROM counted AS c WHERE c.status = 'queued';
    IF v_done IS NOT NULL THEN
        -- Back from waiting, each needs admitting when limits or pauses are
        -- set (deploy/admission.sql).
        PERFORM runq._requeued(d.run_id, false) FROM unnest(v_done) AS d (run_id);
        PERFORM pg_notify('runq', '');
    END IF;
END
$$;

-- Called first by every function that may end a child run: its parent is
-- locked before it (the lock order of runq._cancel_children, a run before
-- its children), so that the end can count the parent down without waiting
-- for it while holding the child. A child pays this lookup; a run without a
-- parent never calls it.
CREATE FUNCTION runq._lock_parents(run_ids bigint[])
    RETURNS void
    LANGUAGE sql
    VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
    SELECT
      FROM runq.runs AS p
     WHERE p.run_id = ANY (ARRAY(SELECT c.parent_run_id FROM runq.runs AS c
                                  WHERE c.run_id = ANY (_lock_parents.run_ids)
                                    AND c.parent_run_id IS NOT NULL))
     ORDER BY p.run_id
       FOR NO KEY UPDATE;
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

REVOKE ALL ON FUNCTION runq._wake_parents(bigint[], timestamptz), runq._lock_parents(bigint[]),
                       runq._family_ended(bigint[], bigint[], timestamptz) FROM PUBLIC;

COMMENT ON FUNCTION runq._wake_parents(bigint[], timestamptz) IS
    'Internal: counts down each of these parents that waits for its children (once per occurrence), and queues again (run.children_done, attempts reset) those whose count reaches 0.';
COMMENT ON FUNCTION runq._lock_parents(bigint[]) IS
    'Internal: locks (FOR NO KEY UPDATE, in run_id order) the parents of these runs, before a function that may end them locks them: a run before its children.';
COMMENT ON FUNCTION runq._family_ended(bigint[], bigint[], timestamptz) IS
    'Internal: after runs ended, cancels the live children of those that spawned (runq._cancel_children), then wakes their parents (runq._wake_parents); NULL arrays: nothing to do.';

COMMIT;
