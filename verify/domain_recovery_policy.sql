-- Verify runq:domain_recovery_policy on pg

BEGIN;

DO $$
BEGIN
    ASSERT (SELECT t.typtype = 'd' AND t.typbasetype = 'text'::regtype
              FROM pg_catalog.pg_type AS t
             WHERE t.oid = 'runq.recovery_policy'::regtype);
    ASSERT EXISTS (SELECT FROM pg_catalog.pg_constraint AS c
                    WHERE c.contypid = 'runq.recovery_policy'::regtype AND c.contype = 'c');
END $$;

ROLLBACK;
