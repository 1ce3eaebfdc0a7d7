-- Verify runq:domain_epoch on pg

BEGIN;

DO $$
BEGIN
    ASSERT (SELECT t.typtype = 'd' AND t.typbasetype = 'bigint'::regtype
              FROM pg_catalog.pg_type AS t
             WHERE t.oid = 'runq.epoch'::regtype);
    ASSERT EXISTS (SELECT FROM pg_catalog.pg_constraint AS c
                    WHERE c.contypid = 'runq.epoch'::regtype AND c.contype = 'c');
END $$;

ROLLBACK;
