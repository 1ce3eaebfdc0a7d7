-- Verify runq:domain_priority_class on pg

BEGIN;

DO $$
BEGIN
    ASSERT (SELECT t.typtype = 'd' AND t.typbasetype = 'smallint'::regtype
              FROM pg_catalog.pg_type AS t
             WHERE t.oid = 'runq.priority_class'::regtype);
    ASSERT EXISTS (SELECT FROM pg_catalog.pg_constraint AS c
                    WHERE c.contypid = 'runq.priority_class'::regtype AND c.contype = 'c');
END $$;

ROLLBACK;
