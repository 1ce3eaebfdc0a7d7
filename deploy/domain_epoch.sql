-- Deploy runq:domain_epoch to pg
-- requires: schema_runq

BEGIN;

-- A domain, not a table CHECK: its check runs only when a value of it is
-- assigned, and from a cached expression. Table CHECKs are rebuilt from
-- their stored text by every UPDATE and run on every row written, so they
-- cost the hot path (a heartbeat changes none of these columns). The price
-- squawk warns of: changing this rule later (ALTER DOMAIN) checks every
-- column of the domain under lock; a later change adds a new domain instead.
-- squawk-ignore ban-create-domain-with-constraint
CREATE DOMAIN runq.epoch AS bigint CHECK (
    VALUE >= 0);

COMMENT ON DOMAIN runq.epoch IS
    'A lease epoch, the fencing token: 0 before the first claim, +1 per claim.';

COMMIT;
