-- Deploy runq:role_runq_client to pg
-- requires: schema_runq

BEGIN;

-- Roles are cluster-wide: a second database in the same cluster deploys runq
-- too, so create the role only when it is absent. Trying and catching the
-- duplicate, rather than looking first, also holds when two databases deploy
-- at the same moment.
DO $$
BEGIN
    CREATE ROLE runq_client NOLOGIN;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
    NULL;
END $$;

GRANT USAGE ON SCHEMA runq TO runq_client;

COMMIT;
