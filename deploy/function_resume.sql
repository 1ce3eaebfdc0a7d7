-- Deploy runq:function_resume to pg
-- requires: admission
-- requires: table_pause_settings
-- requires: argument_checks
-- requires: argument_check_class_key
-- requires: role_runq_admin

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- Called by operators. Holds the settings lock exclusive, removes the pause,
-- and admits what it held that no other pause or limit holds: every parked
-- run is read once (runq._rebalance(true)), and the NOTIFY wakes the pools.
CREATE FUNCTION runq.resume(scope text, key text)
    RETURNS boolean
    LANGUAGE plpgsql
    VOLATILE
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF runq._check_choice('scope', resume.scope, 'class, kind, tenant, schedule')
       AND runq._check_identifier('key', resume.key)
       AND (resume.scope <> 'class' OR runq._check_class_key('key', resume.key)) THEN
    END IF;
    PERFORM runq._lock_settings();

    DELETE FROM runq.pause_settings AS p
     WHERE p.scope = resume.scope AND p.key = resume.key;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    PERFORM runq._rebalance(true);
    PERFORM pg_notify('runq', '');
    RETURN true;
END
$$;

REVOKE ALL ON FUNCTION runq.resume(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION runq.resume(text, text) TO runq_admin;

COMMENT ON FUNCTION runq.resume(text, text) IS
$c$End a pause of a class, kind, tenant or schedule: its queued runs are claimable at once (as far as no other pause or limit holds them), and NOTIFY runq wakes the workers. True when it resumed, false when it was not paused.
Raises 22023 (scope not class, kind, tenant or schedule; key NULL, empty or over 256 characters; a class key that is not a class 0..32767 without leading zeros).$c$;

COMMIT;
