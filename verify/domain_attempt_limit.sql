-- Verify runq:domain_attempt_limit on pg

BEGIN;

DO $$
BEGIN
    ASSERT (SELECT t.typtype = 'd' AND t.typbasetype = 'integer'::regtype
              FROM pg_catalog.pg_type AS t
             WHERE t.oid = 'runq.attempt_limit'::regtype);
    ASSERT EXISTS (SELECT FROM pg_catalog.pg_constraint AS c
                    WHERE c.contypid = 'runq.attempt_limit'::regtype AND c.contype = 'c');
END $$;

ROLLBACK;
