-- Deploy runq:domain_failure_record to pg
-- requires: schema_runq

BEGIN;

-- A domain, not a table CHECK: its check runs only when a value of it is
-- assigned, and from a cached expression. Table CHECKs are rebuilt from
-- their stored text by every UPDATE and run on every row written, so they
-- cost the hot path (a heartbeat changes none of these columns). The price
-- squawk warns of: changing this rule later (ALTER DOMAIN) checks every
-- column of the domain under lock; a later change adds a new domain instead.
-- squawk-ignore ban-create-domain-with-constraint
CREATE DOMAIN runq.failure_record AS jsonb CHECK (
    coalesce(jsonb_typeof(VALUE -> 'code') = 'string' AND jsonb_typeof(VALUE -> 'message') = 'string', VALUE IS NULL));

COMMENT ON DOMAIN runq.failure_record IS
    'Why a run is in the dead letter: an object with at least a string code and a string message.';

COMMIT;
