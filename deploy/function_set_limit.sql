-- Deploy runq:function_set_limit to pg
-- requires: admission
-- requires: table_limit_settings
-- requires: argument_checks
-- requires: role_runq_admin

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- Called by operators. Holds the settings lock exclusive, so no admission
-- runs under the old limit once this one commits. A lower limit parks the
-- newest admitted runs over it at once (running runs are never touched) and
-- leaves a debt for the running runs still over it; a higher one admits
-- parked runs up to it. A default (key NULL) applies to every key of the
-- scope without its own row, so changing it reads every admitted run of the
-- scope: a statement of seconds behind a queue of millions.
CREATE FUNCTION runq.set_limit(scope text, key text, max_running integer)
    RETURNS void
    LANGUAGE plpgsql
    VOLATILE
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    IF runq._check_choice('scope', set_limit.scope, 'tenant, kind')
       AND runq._check_identifier('key', set_limit.key, true)
       AND (set_limit.max_running IS NULL OR runq._check_count('max_running', set_limit.max_running)) THEN
    END IF;
    PERFORM runq._lock_settings();

    IF set_limit.max_running IS NULL THEN
        DELETE FROM runq.limit_settings AS l
         WHERE l.scope = set_limit.scope AND l.key IS NOT DISTINCT FROM set_limit.key;
    ELSE
        INSERT INTO runq.limit_settings AS l (scope, key, max_running)
        VALUES (set_limit.scope, set_limit.key, set_limit.max_running)
            ON CONFLICT (scope, key) DO UPDATE SET max_running = EXCLUDED.max_running;
    END IF;

    -- Each key of the scope this row governs, with its admitted runs ranked:
    -- running first (they keep their slots), then in claim order. A keyed row
    -- reads its key's index ranges; a default, every admitted run.
    WITH admitted AS (
        SELECT r.run_id, r.status, r.tenant_id::text AS key, r.priority, r.ready_at
          FROM runq.runs AS r
         WHERE set_limit.scope = 'tenant' AND set_limit.key IS NOT NULL
           AND r.tenant_id = set_limit.key AND r.status IN ('queued', 'running') AND NOT r.parked
        UNION ALL
        SELECT r.run_id, r.status, r.kind::text, r.priority, r.ready_at
          FROM runq.runs AS r
         WHERE set_limit.scope = 'kind' AND set_limit.key IS NOT NULL
           AND r.kind = set_limit.key AND r.status IN ('queued', 'running') AND NOT r.parked
        UNION ALL
        SELECT r.run_id, r.status, r.tenant_id::text, r.priority, r.ready_at
          FROM runq.runs AS r
         WHERE set_limit.scope = 'tenant' AND set_limit.key IS NULL
           AND r.status IN ('queued', 'running') AND NOT r.parked
        UNION ALL
        SELECT r.run_id, r.status, r.kind::text, r.priority, r.ready_at
          FROM runq.runs AS r
         WHERE set_limit.scope = 'kind' AND set_limit.key IS NULL
           AND r.status IN ('queued', 'running') AND NOT r.parked
    ), ranked AS (
        SELECT a.run_id, a.status, a.key, runq._limit_of(set_limit.scope, a.key) AS max_running,
               row_number() OVER (PARTITION BY a.key
                                  ORDER BY a.status = 'running' DESC, a.priority, a.ready_at, a.run_id) AS n
          FROM admitted AS a
         WHERE set_limit.key IS NOT NULL
            OR NOT EXISTS (SELECT FROM runq.limit_settings AS o
                            WHERE o.scope = set_limit.scope AND o.key = a.key)
    )
    -- The row's state is tested again here: a run a claim took meanwhile is
    -- running now, and keeps its slot.
    UPDATE runq.runs AS r
       SET parked = true, updated_at = clock_timestamp()
      FROM ranked AS x
     WHERE r.run_id = x.run_id AND x.status = 'queued' AND x.n > x.max_running
       AND r.status = 'queued' AND NOT r.parked;

    -- The debts, from a count taken after the parking, in a statement of its
    -- own: by how much each key's running runs exceed its limit. (Over its
    -- limit a key has no admitted queued run left, so its running runs are
    -- all it counts; a claim meanwhile only turned admitted into running.)
    INSERT INTO runq.limit_debts AS d (scope, key, debt)
    SELECT set_limit.scope, x.key, x.running - x.max_running
      FROM (SELECT k.key, count(*) AS running,
                   runq._limit_of(set_limit.scope, k.key) AS max_running
              FROM runq.runs AS r
             CROSS JOIN LATERAL (SELECT CASE set_limit.scope WHEN 'tenant' THEN r.tenant_id::text
                                                             ELSE r.kind::text END) AS k (key)
             WHERE r.status = 'running' AND r.lease IS NOT NULL
               AND (set_limit.key IS NULL OR k.key = set_limit.key)
             GROUP BY k.key) AS x
     WHERE x.running > x.max_running
        ON CONFLICT (scope, key) DO UPDATE SET debt = EXCLUDED.debt;

    -- A key with no run over its limit owes nothing; one with room admits.
    PERFORM runq._rebalance(true);
END
$$;

REVOKE ALL ON FUNCTION runq.set_limit(text, text, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION runq.set_limit(text, text, integer) TO runq_admin;

COMMENT ON FUNCTION runq.set_limit(text, text, integer) IS
$c$Set how many runs of one tenant or kind (scope 'tenant' or 'kind') may be running at once; key NULL sets the default for every tenant (or kind) without a row of its own; max_running NULL removes the row. claim never exceeds a limit, however many workers claim at once; waiting_for_user runs do not count. Runs over a limit stay queued, keep their place and are claimed as slots free; lowering a limit below the running count stops new claims for that key until the count falls under it (running runs go on).
Raises 22023 (scope not tenant or kind, a key of over 256 characters or empty, max_running below 1).$c$;

COMMIT;
