-- Deploy runq:function_drop_schedule to pg
-- requires: table_schedule_settings
-- requires: argument_checks
-- requires: role_runq_admin

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- Called by operators. Deletes the schedule's row (waiting for a tick that
-- holds it, which is short). The runs it created are left as they are: they
-- keep their schedule name, and a schedule created again under that name
-- finds a live one of them as its previous run (skipped_overlap). A pause of
-- the schedule is left too: pauses are runq.pause's and runq.resume's.
-- Raises 22023 (name NULL, empty or over 256 characters).
CREATE FUNCTION runq.drop_schedule(name text)
    RETURNS boolean
    LANGUAGE plpgsql
    VOLATILE
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF runq._check_identifier('name', drop_schedule.name) THEN
    END IF;
    DELETE FROM runq.schedule_settings AS s WHERE s.name = drop_schedule.name;
    RETURN FOUND;
END
$$;

REVOKE ALL ON FUNCTION runq.drop_schedule(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION runq.drop_schedule(text) TO runq_admin;

COMMENT ON FUNCTION runq.drop_schedule(text) IS
$c$Drop a schedule: no more slots. The runs it created are left as they are (they keep its name). True when dropped, false when there was no schedule of that name.
Raises 22023 (name NULL, empty or over 256 characters).$c$;

COMMIT;
