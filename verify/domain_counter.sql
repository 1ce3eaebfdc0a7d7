-- Verify runq:domain_counter on pg

BEGIN;

DO $$
BEGIN
    ASSERT (SELECT t.typtype = 'd' AND t.typbasetype = 'integer'::regtype
              FROM pg_catalog.pg_type AS t
             WHERE t.oid = 'runq.counter'::regtype);
    ASSERT EXISTS (SELECT FROM pg_catalog.pg_constraint AS c
                    WHERE c.contypid = 'runq.counter'::regtype AND c.contype = 'c');
END $$;

ROLLBACK;
