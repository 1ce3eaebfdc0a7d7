-- Verify runq:domain_duration on pg

BEGIN;

DO $$
BEGIN
    ASSERT (SELECT t.typtype = 'd' AND t.typbasetype = 'interval'::regtype
              FROM pg_catalog.pg_type AS t
             WHERE t.oid = 'runq.duration'::regtype);
    ASSERT EXISTS (SELECT FROM pg_catalog.pg_constraint AS c
                    WHERE c.contypid = 'runq.duration'::regtype AND c.contype = 'c');
END $$;

ROLLBACK;
