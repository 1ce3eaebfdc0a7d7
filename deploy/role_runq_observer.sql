-- Deploy runq:role_runq_observer to pg
-- requires: schema_runq

BEGIN;

-- The read-only role of dashboards and metrics (docs/contract.md "Observing
-- the queue"): it is granted read functions and views only, so a login role
-- that holds nothing else can change nothing.
--
-- Roles are cluster-wide: a second database in the same cluster deploys runq
-- too, so create the role only when it is absent. Trying and catching the
-- duplicate, rather than looking first, also holds when two databases deploy
-- at the same moment.
DO $$
BEGIN
    CREATE ROLE runq_observer NOLOGIN;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
    NULL;
END $$;

GRANT USAGE ON SCHEMA runq TO runq_observer;

COMMIT;
