-- Deploy runq:function__backoff to pg
-- requires: table_settings

BEGIN;

-- Called by runq._expire_leases. least(cap, base * 2^(attempts-1)); the
-- exponent is clamped so a large max_attempts cannot overflow the interval.
CREATE FUNCTION runq._backoff(attempts integer)
    RETURNS interval
    LANGUAGE sql
    STABLE
    SET search_path = pg_catalog, pg_temp
AS $$
    SELECT least(s.backoff_cap,
                 s.backoff_base * power(2, least(greatest(attempts, 1) - 1, 40)))
      FROM runq.settings AS s
$$;

REVOKE ALL ON FUNCTION runq._backoff(integer) FROM PUBLIC;

COMMENT ON FUNCTION runq._backoff(integer) IS
    'Internal: the sweep''s requeue delay after the given attempt, from runq.settings.';

COMMIT;
