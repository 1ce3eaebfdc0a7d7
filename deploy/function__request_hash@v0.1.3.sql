-- Deploy runq:function__request_hash to pg
-- requires: schema_runq

BEGIN;

-- Called by runq.submit only. The hash covers what the contract names and
-- nothing that depends on the session's settings: times and intervals enter
-- as epoch seconds, not as text (which would follow TimeZone/IntervalStyle),
-- and jsonb's text form has a canonical key order.
CREATE FUNCTION runq._request_hash(
    kind text, payload jsonb, session_id text, priority integer,
    scheduled_for timestamptz, max_attempts integer, recovery_policy text,
    queue_ttl interval)
    RETURNS bytea
    LANGUAGE sql
    STABLE
    SET search_path = pg_catalog, pg_temp
AS $$
    SELECT sha256(convert_to(jsonb_build_array(
               kind, payload, session_id, priority,
               extract(epoch FROM scheduled_for), max_attempts, recovery_policy,
               extract(epoch FROM queue_ttl))::text, 'UTF8'))
$$;

REVOKE ALL ON FUNCTION runq._request_hash(text, jsonb, text, integer, timestamptz, integer, text, interval) FROM PUBLIC;

COMMENT ON FUNCTION runq._request_hash(text, jsonb, text, integer, timestamptz, integer, text, interval) IS
    'Internal: SHA-256 of a submit request, compared when an idempotency key is reused.';

COMMIT;
