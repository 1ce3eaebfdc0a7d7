-- Verify runq:domain_run_status on pg

BEGIN;

DO $$
BEGIN
    ASSERT (SELECT t.typtype = 'd' AND t.typbasetype = 'text'::regtype
              FROM pg_catalog.pg_type AS t
             WHERE t.oid = 'runq.run_status'::regtype);
    ASSERT EXISTS (SELECT FROM pg_catalog.pg_constraint AS c
                    WHERE c.contypid = 'runq.run_status'::regtype AND c.contype = 'c');
END $$;

ROLLBACK;
