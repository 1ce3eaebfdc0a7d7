-- Deploy runq:function__swap_in to pg
-- requires: admission
-- requires: index_runs_parked

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- The claim's slow path, when it found fewer runs than it asked for while
-- runs of its classes are parked. An admission reserves a slot for a run the
-- claim may take at any time, but which claim takes it depends on the classes
-- and kinds the claim asks for: a tenant at its limit of admitted runs may
-- have fewer running than its limit while a claim of other classes or kinds
-- finds only its parked runs. For each such tenant (one probe per tenant of
-- each class, skipping the tenants whose running runs fill their limit), the
-- newest admitted run that this claim would not take is parked and the oldest
-- parked run it would take is admitted in its place: no count changes. With
-- room to spare (a slot handed on while its key was busy), the run is simply
-- admitted. Kind limits are left to their slots' hand-on and the sweep.
-- Returns how many runs it admitted, at most wanted.
CREATE FUNCTION runq._swap_in(classes integer[], kinds text[], wanted integer)
    RETURNS integer
    LANGUAGE plpgsql
    VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_class     integer;
    v_tenant    text;
    v_limit     bigint;
    v_in        record;
    v_out       bigint;
    v_admitted  integer := 0;
    v_visited   integer;
BEGIN
    -- Nothing to swap without a limit; nothing counted right under an older
    -- snapshot; and the settings lock only tried: this claim holds the rows
    -- it took, which a pause waiting for the lock may be waiting for.
    IF NOT EXISTS (SELECT FROM runq.limit_settings) OR NOT runq._counts_are_fresh()
       OR NOT pg_try_advisory_xact_lock_shared(runq._settings_lock()) THEN
        RETURN 0;
    END IF;
    FOR v_class IN SELECT DISTINCT c FROM unnest(classes) AS c ORDER BY c LOOP
        v_tenant := NULL;
        v_visited := 0;
        LOOP
            -- At most 50 tenants a class: an idle claim stays cheap however
            -- many tenants sit at their limits; the sweep sees the rest.
            v_visited := v_visited + 1;
            EXIT WHEN v_visited > 50;
            SELECT r.tenant_id::text INTO v_tenant
              FROM runq.runs AS r
             WHERE r.status = 'queued' AND r.parked AND r.priority = v_class
               AND (v_tenant IS NULL OR r.tenant_id > v_tenant)
             ORDER BY r.tenant_id
             LIMIT 1;
            EXIT WHEN NOT FOUND;
            v_limit := runq._limit_of('tenant', v_tenant);
            CONTINUE WHEN v_limit IS NULL
                       OR (SELECT count(*) FROM runq.runs AS r
                            WHERE r.tenant_id = v_tenant AND r.status = 'running'
                              AND r.lease IS NOT NULL) >= v_limit
                       OR NOT pg_try_advisory_xact_lock(runq._key_lock('tenant', v_tenant));
            SELECT r.run_id, r.kind::text AS kind INTO v_in
              FROM runq.runs AS r
             WHERE r.status = 'queued' AND r.parked AND r.priority = v_class
               AND r.tenant_id = v_tenant
               AND r.ready_at <= clock_timestamp()
               AND (kinds IS NULL OR r.kind = ANY (kinds))
               AND NOT runq._paused(r.priority, r.kind, r.tenant_id)
             ORDER BY r.ready_at, r.run_id
             LIMIT 1
               FOR UPDATE SKIP LOCKED;
            CONTINUE WHEN NOT FOUND;
            v_out := NULL;
            IF runq._taken('tenant', v_tenant, v_limit) >= v_limit THEN
                SELECT r.run_id INTO v_out
                  FROM runq.runs AS r
                 WHERE r.status = 'queued' AND NOT r.parked AND r.tenant_id = v_tenant
                   AND NOT (r.priority = ANY (classes)
                            AND (kinds IS NULL OR r.kind = ANY (kinds))
                            AND r.ready_at <= clock_timestamp())
                   AND (r.kind = v_in.kind OR runq._limit_of('kind', r.kind) IS NULL)
                 ORDER BY r.priority DESC, r.ready_at DESC, r.run_id DESC
                 LIMIT 1
                   FOR UPDATE SKIP LOCKED;
                CONTINUE WHEN NOT FOUND;
            END IF;
            -- The run coming in needs room in its kind too, unless the run
            -- going out leaves it the same.
            CONTINUE WHEN NOT (v_out IS NOT NULL
                               AND (SELECT r.kind = v_in.kind FROM runq.runs AS r WHERE r.run_id = v_out))
                      AND NOT runq._room_tried('kind', v_in.kind);
            UPDATE runq.runs AS r
               SET parked = (r.run_id IS NOT DISTINCT FROM v_out), updated_at = clock_timestamp()
             WHERE r.run_id IN (v_in.run_id, v_out);
            v_admitted := v_admitted + 1;
            IF v_admitted >= wanted THEN
                RETURN v_admitted;
            END IF;
        END LOOP;
    END LOOP;
    RETURN v_admitted;
END
$$;

REVOKE ALL ON FUNCTION runq._swap_in(integer[], text[], integer) FROM PUBLIC;

COMMENT ON FUNCTION runq._swap_in(integer[], text[], integer) IS
    'Claim''s slow path: admits parked runs of these classes and kinds whose tenant runs fewer than its limit, parking in their place its admitted runs this claim would not take; returns how many.';

COMMIT;
