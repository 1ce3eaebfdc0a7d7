-- Deploy runq:domain_tool_idempotency to pg
-- requires: schema_runq

BEGIN;

-- A domain, not a table CHECK: its check runs only when a value of it is
-- assigned, and from a cached expression. Table CHECKs are rebuilt from
-- their stored text by every UPDATE and run on every row written, so they
-- cost the hot path (a heartbeat changes none of these columns). The price
-- squawk warns of: changing this rule later (ALTER DOMAIN) checks every
-- column of the domain under lock; a later change adds a new domain instead.
-- squawk-ignore ban-create-domain-with-constraint
CREATE DOMAIN runq.tool_idempotency AS text CHECK (
    VALUE IN ('read_only', 'idempotent', 'non_idempotent'));

COMMENT ON DOMAIN runq.tool_idempotency IS
    'A tool''s declared idempotency class: what a dead lease makes of a call left started.';

COMMIT;
