-- Deploy runq:function_list_runs to pg
-- requires: table_runs
-- requires: table_run_usage
-- requires: type_run_info
-- requires: index_runs_running_tenant
-- requires: index_runs_running_kind
-- requires: index_runs_list_tenant
-- requires: index_runs_list_kind
-- requires: argument_checks
-- requires: role_runq_observer
-- requires: role_runq_admin

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- Called by dashboards (runq_observer) and operators. Newest first, keyset
-- paged by before_run_id, so a page costs the same at the millionth run as
-- at the first. Each filter combination reads index ranges only:
--   no filter                the primary key, backwards;
--   tenant_id (and kind)     runs_list_tenant_idx, one range per kind and status;
--   kind, or status alone    runs_list_kind_idx, one range per kind and status;
--   running runs             runs_running_tenant_idx or runs_running_kind_idx
--                            (the list indexes leave them out: a claim writes
--                            no entry there), all that match, as many as the
--                            workers hold at most.
-- A range yields at most max_runs ids; the newest max_runs of them all are
-- the page. A range bounds its status from both sides rather than with =
-- and orders by status then run_id: that order only the list index yields,
-- so no plan walks the primary key backwards filtering for the range (the
-- planner's guess for a generic plan, which read every newer run when the
-- range had no recent ones). With = the planner drops status from the order. Without a kind, the kinds are found by skipping through the
-- index (one probe per kind), not by reading its entries.
-- Raises 22023 (an unknown status, an empty or over-long tenant_id or kind,
-- max_runs NULL or below 1).
CREATE OR REPLACE FUNCTION runq.list_runs(status text DEFAULT NULL, tenant_id text DEFAULT NULL,
                               kind text DEFAULT NULL, before_run_id bigint DEFAULT NULL,
                               max_runs integer DEFAULT 50)
    RETURNS SETOF runq.run_info
    LANGUAGE plpgsql
    STABLE
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_before bigint := coalesce(list_runs.before_run_id, 9223372036854775807);
    -- The statuses the list indexes hold: every one but running.
    v_statuses text[] := CASE WHEN list_runs.status IS NULL
                              THEN ARRAY['queued', 'waiting_for_user', 'waiting_for_children',
                                         'succeeded', 'failed', 'cancelled']
                              WHEN list_runs.status = 'running' THEN '{}'
                              ELSE ARRAY[list_runs.status] END;
    v_kinds text[];
    v_ids bigint[] := '{}'::bigint[];
BEGIN
    -- Each check is true or raises 22023 naming the argument and its value
    -- (deploy/argument_checks).
    IF (list_runs.status IS NULL
        OR runq._check_choice('status', list_runs.status,
                              'queued, running, waiting_for_user, waiting_for_children, succeeded, failed, cancelled'))
       AND runq._check_identifier('tenant_id', list_runs.tenant_id, true)
       AND runq._check_identifier('kind', list_runs.kind, true)
       AND runq._check_count('max_runs', list_runs.max_runs) THEN
    END IF;

    IF list_runs.status IS NULL AND list_runs.tenant_id IS NULL AND list_runs.kind IS NULL THEN
        v_ids := ARRAY(SELECT r.run_id FROM runq.runs AS r
                        WHERE r.run_id < v_before
                        ORDER BY r.run_id DESC
                        LIMIT list_runs.max_runs);
    ELSE
        IF list_runs.status IS NULL OR list_runs.status = 'running' THEN
            -- Every running run that matches, unordered, so that the plan
            -- reads runs_running_tenant_idx, runs_running_kind_idx (a running
            -- run always has a lease) or either whole; runs_held_idx in
            -- run_id order would step over every waiting_for_user run.
            v_ids := ARRAY(SELECT r.run_id FROM runq.runs AS r
                            WHERE r.status = 'running' AND r.lease IS NOT NULL
                              AND r.run_id < v_before
                              AND (list_runs.tenant_id IS NULL OR r.tenant_id = list_runs.tenant_id)
                              AND (list_runs.kind IS NULL OR r.kind = list_runs.kind));
        END IF;
        IF cardinality(v_statuses) > 0 AND list_runs.tenant_id IS NOT NULL THEN
            v_kinds := CASE WHEN list_runs.kind IS NOT NULL THEN ARRAY[list_runs.kind] ELSE ARRAY(
                WITH RECURSIVE k(kind) AS (
                    (SELECT r.kind::text FROM runq.runs AS r
                      WHERE r.tenant_id = list_runs.tenant_id AND r.status <> 'running'
                      ORDER BY r.kind LIMIT 1)
                    UNION ALL
                    SELECT (SELECT r.kind::text FROM runq.runs AS r
                             WHERE r.tenant_id = list_runs.tenant_id AND r.kind > k.kind
                               AND r.status <> 'running'
                             ORDER BY r.kind LIMIT 1)
                      FROM k WHERE k.kind IS NOT NULL)
                SELECT k.kind FROM k WHERE k.kind IS NOT NULL) END;
            v_ids := v_ids || ARRAY(
                SELECT x.run_id
                  FROM unnest(v_kinds) AS k(kind)
                 CROSS JOIN unnest(v_statuses) AS s(status)
                 CROSS JOIN LATERAL (
                       SELECT r.run_id FROM runq.runs AS r
                        WHERE r.tenant_id = list_runs.tenant_id AND r.kind = k.kind
                          AND r.status >= s.status AND r.status <= s.status
                          AND r.status <> 'running' AND r.run_id < v_before
                        ORDER BY r.status DESC, r.run_id DESC
                        LIMIT list_runs.max_runs) AS x);
        ELSIF cardinality(v_statuses) > 0 THEN
            v_kinds := CASE WHEN list_runs.kind IS NOT NULL THEN ARRAY[list_runs.kind] ELSE ARRAY(
                WITH RECURSIVE k(kind) AS (
                    (SELECT r.kind::text FROM runq.runs AS r
                      WHERE r.status <> 'running'
                      ORDER BY r.kind LIMIT 1)
                    UNION ALL
                    SELECT (SELECT r.kind::text FROM runq.runs AS r
                             WHERE r.kind > k.kind AND r.status <> 'running'
                             ORDER BY r.kind LIMIT 1)
                      FROM k WHERE k.kind IS NOT NULL)
                SELECT k.kind FROM k WHERE k.kind IS NOT NULL) END;
            v_ids := v_ids || ARRAY(
                SELECT x.run_id
                  FROM unnest(v_kinds) AS k(kind)
                 CROSS JOIN unnest(v_statuses) AS s(status)
                 CROSS JOIN LATERAL (
                       SELECT r.run_id FROM runq.runs AS r
                        WHERE r.kind = k.kind AND r.status >= s.status AND r.status <= s.status
                          AND r.status <> 'running' AND r.run_id < v_before
                        ORDER BY r.status DESC, r.run_id DESC
                        LIMIT list_runs.max_runs) AS x);
        END IF;
    END IF;

    -- One snapshot for the whole call (a STABLE function's), so the rows
    -- read here are the ones the ids above were found in.
    RETURN QUERY
        SELECT r.run_id, r.tenant_id::text, r.session_id::text, r.kind::text, r.status::text,
               r.priority::integer, r.attempts::integer, r.max_attempts::integer,
               r.scheduled_for, r.lease_epoch::bigint, r.cancel_requested, r.result,
               r.failure::jsonb, r.question, r.created_at, r.updated_at, r.finished_at,
               coalesce(u.usage, '{}'), r.budget, r.deadline, r.parent_run_id
          FROM (SELECT i.id FROM unnest(v_ids) AS i(id)
                 ORDER BY i.id DESC LIMIT list_runs.max_runs) AS page
          JOIN runq.runs AS r ON r.run_id = page.id
          LEFT JOIN runq.run_usage AS u ON u.run_id = r.run_id
         ORDER BY r.run_id DESC;
END
$$;

REVOKE ALL ON FUNCTION runq.list_runs(text, text, text, bigint, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION runq.list_runs(text, text, text, bigint, integer)
    TO runq_observer, runq_admin;

COMMENT ON FUNCTION runq.list_runs(text, text, text, bigint, integer) IS
$c$Up to max_runs runs, newest first, with the columns of runq.get_run: those of a status, a tenant and a kind when given (each filter optional), and older than before_run_id when given (the next page: the last run_id of this one). Served by index ranges for every combination of filters, however many runs are stored.
Raises 22023 (an unknown status, an empty or over-long tenant_id or kind, max_runs NULL or below 1).$c$;

COMMIT;
