-- The checks every runq role passes. Each verify/role_*.sql names its role
-- and includes this file:
--
--     \set role runq_worker
--     \ir lib/role.sql
--
-- NOLOGIN (login roles are granted it), USAGE on schema runq (to reach the
-- functions it is granted) and no CREATE there (nothing of runq's may be
-- replaced or added to by a caller).

\ir begin.sql
SET LOCAL verify.role = :'role';

DO $$
BEGIN
    ASSERT (SELECT NOT a.rolcanlogin AND pg_catalog.has_schema_privilege(a.oid, 'runq', 'USAGE')
                   AND NOT pg_catalog.has_schema_privilege(a.oid, 'runq', 'CREATE')
              FROM pg_catalog.pg_roles AS a WHERE a.rolname = current_setting('verify.role')),
        format('role %s: not NOLOGIN, or no USAGE on schema runq, or CREATE there', current_setting('verify.role'));
END $$;

ROLLBACK;
