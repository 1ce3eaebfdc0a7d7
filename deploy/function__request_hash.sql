-- Deploy runq:function__request_hash to pg
-- requires: function__request_hash@v0.1.3

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- Called by runq.submit only. The hash covers what the contract names and
-- nothing that depends on the session's settings: times and intervals enter
-- as epoch seconds, not as text (which would follow TimeZone/IntervalStyle),
-- and jsonb's text form has a canonical key order.
--
-- It covers budget and timeout too, appended to the array only when either
-- is given, so a request without them hashes as it did before the hash knew
-- them, and a key stored with that hash still recognises its retry. They
-- extend the signature: the one without them is dropped.
-- Internal, and called by runq.submit alone, whose change comes right after
-- this one in the plan.
-- squawk-ignore ban-drop-function
DROP FUNCTION runq._request_hash(text, jsonb, text, integer, timestamptz, integer, text, interval);
CREATE FUNCTION runq._request_hash(
    kind text, payload jsonb, session_id text, priority integer,
    scheduled_for timestamptz, max_attempts integer, recovery_policy text,
    queue_ttl interval, budget jsonb, timeout interval)
    RETURNS bytea
    LANGUAGE sql
    STABLE
    SET search_path = pg_catalog, pg_temp
AS $$
    SELECT sha256(convert_to((
               jsonb_build_array(
                   kind, payload, session_id, priority,
                   extract(epoch FROM scheduled_for), max_attempts, recovery_policy,
                   extract(epoch FROM queue_ttl))
               || CASE WHEN budget IS NULL AND timeout IS NULL THEN '[]'::jsonb
                       ELSE jsonb_build_array(budget, extract(epoch FROM timeout)) END
           )::text, 'UTF8'))
$$;

REVOKE ALL ON FUNCTION runq._request_hash(text, jsonb, text, integer, timestamptz, integer, text, interval, jsonb, interval) FROM PUBLIC;

COMMENT ON FUNCTION runq._request_hash(text, jsonb, text, integer, timestamptz, integer, text, interval, jsonb, interval) IS
    'Internal: SHA-256 of a submit request, compared when an idempotency key is reused; without budget and timeout, the hash v0.1 computed.';

COMMIT;
