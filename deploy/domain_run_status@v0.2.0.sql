-- Deploy runq:domain_run_status to pg
-- requires: schema_runq

BEGIN;

-- A domain, not a table CHECK: its check runs only when a value of it is
-- assigned, and from a cached expression. Table CHECKs are rebuilt from
-- their stored text by every UPDATE and run on every row written, so they
-- cost the hot path (a heartbeat changes none of these columns). The price
-- squawk warns of: changing this rule later (ALTER DOMAIN) checks every
-- column of the domain under lock; a later change adds a new domain instead.
-- squawk-ignore ban-create-domain-with-constraint
CREATE DOMAIN runq.run_status AS text CHECK (
    VALUE IN ('queued', 'running', 'waiting_for_user', 'succeeded',
              'failed', 'cancelled'));

COMMENT ON DOMAIN runq.run_status IS
    'A run''s status: queued, running, waiting_for_user (non-terminal), succeeded, failed, cancelled (terminal).';

COMMIT;
