-- Deploy runq:function_pause to pg
-- requires: admission
-- requires: table_pause_settings
-- requires: argument_checks
-- requires: argument_check_class_key
-- requires: role_runq_admin

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- Called by operators. Holds the settings lock exclusive, so no admission
-- straddles the pause, and parks the admitted queued runs it covers in one
-- statement (a tenant's, a kind's or a class's: for a backlog of a million
-- runs, seconds and some hundreds of megabytes of WAL). Running runs go on.
-- A schedule's pause is only its row: tick reads it.
CREATE FUNCTION runq.pause(scope text, key text, reason text DEFAULT NULL)
    RETURNS boolean
    LANGUAGE plpgsql
    VOLATILE
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_now  timestamptz := clock_timestamp();
BEGIN
    IF runq._check_choice('scope', pause.scope, 'class, kind, tenant, schedule')
       AND runq._check_identifier('key', pause.key)
       AND (pause.scope <> 'class' OR runq._check_class_key('key', pause.key)) THEN
    END IF;
    PERFORM runq._lock_settings();

    INSERT INTO runq.pause_settings (scope, key, reason, paused_at)
    VALUES (pause.scope, pause.key, pause.reason, v_now)
        ON CONFLICT (scope, key) DO NOTHING;
    IF NOT FOUND THEN
        RETURN false;
    END IF;

    -- One statement per scope, so that each reads its own index.
    CASE pause.scope
    WHEN 'tenant' THEN
        UPDATE runq.runs AS r SET parked = true, updated_at = v_now
         WHERE NOT r.parked AND r.status = 'queued' AND r.tenant_id = pause.key;
    WHEN 'kind' THEN
        UPDATE runq.runs AS r SET parked = true, updated_at = v_now
         WHERE NOT r.parked AND r.status = 'queued' AND r.kind = pause.key;
    WHEN 'class' THEN
        UPDATE runq.runs AS r SET parked = true, updated_at = v_now
         WHERE NOT r.parked AND r.status = 'queued' AND r.priority = pause.key::integer;
    ELSE
        NULL;
    END CASE;
    RETURN true;
END
$$;

REVOKE ALL ON FUNCTION runq.pause(text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION runq.pause(text, text, text) TO runq_admin;

COMMENT ON FUNCTION runq.pause(text, text, text) IS
$c$Pause a priority class (key: the class as text, '10'), a kind, a tenant or a schedule: its queued runs are not claimed and keep their place; running runs go on; submit still accepts runs; queue_ttl keeps counting; a paused schedule does not tick. True when it paused, false when already paused.
Raises 22023 (scope not class, kind, tenant or schedule; key NULL, empty or over 256 characters; a class key that is not a class 0..32767 without leading zeros).$c$;

COMMIT;
