-- Verify runq:domain_failure_record on pg

BEGIN;

DO $$
BEGIN
    ASSERT (SELECT t.typtype = 'd' AND t.typbasetype = 'jsonb'::regtype
              FROM pg_catalog.pg_type AS t
             WHERE t.oid = 'runq.failure_record'::regtype);
    ASSERT EXISTS (SELECT FROM pg_catalog.pg_constraint AS c
                    WHERE c.contypid = 'runq.failure_record'::regtype AND c.contype = 'c');
END $$;

ROLLBACK;
