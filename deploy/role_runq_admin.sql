-- Deploy runq:role_runq_admin to pg
-- requires: schema_runq

BEGIN;

-- Roles are cluster-wide: a second database in the same cluster deploys runq
-- too, so create the role only when it is absent.
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'runq_admin') THEN
        CREATE ROLE runq_admin NOLOGIN;
    END IF;
END $$;

GRANT USAGE ON SCHEMA runq TO runq_admin;

COMMIT;
