-- Deploy runq:function_children to pg
-- requires: table_spawns
-- requires: type_child_info
-- requires: argument_checks
-- requires: role_runq_client
-- requires: role_runq_worker
-- requires: role_runq_admin
-- requires: role_runq_observer

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- Read by a parent's resumed attempt (what its children did), by the
-- submitter and by operators. Spawn order is run_id order: a parent's spawns
-- are serialised by its row lock, and identities grow. A child purged before
-- its parent is no longer listed.
CREATE FUNCTION runq.children(run_id bigint)
    RETURNS SETOF runq.child_info
    LANGUAGE plpgsql
    STABLE
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN QUERY
    SELECT s.key, c.run_id, c.kind::text, c.status::text, c.result, c.failure::jsonb,
           coalesce(u.usage, '{}'::jsonb)
      FROM runq.spawns AS s
      JOIN runq.runs AS c ON c.run_id = s.run_id
      LEFT JOIN runq.run_usage AS u ON u.run_id = s.run_id
     WHERE s.parent_run_id = children.run_id
     ORDER BY s.run_id;
    IF NOT FOUND AND NOT EXISTS (SELECT FROM runq.runs AS r WHERE r.run_id = children.run_id) THEN
        PERFORM runq._run_not_found(children.run_id);
    END IF;
END
$$;

REVOKE ALL ON FUNCTION runq.children(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION runq.children(bigint) TO runq_client, runq_worker, runq_admin, runq_observer;

COMMENT ON FUNCTION runq.children(bigint) IS
$c$The run's children (runq.spawn) in spawn order, as runq.child_info rows: key, run_id, kind, status, result, failure, and usage (the child's totals, its descendants' included; {} when none). Not fenced: it reads.
Raises 22023 (NULL run_id), RQ003 (no such run).$c$;

COMMIT;
