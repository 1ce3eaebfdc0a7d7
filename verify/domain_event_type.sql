-- Verify runq:domain_event_type on pg

BEGIN;

DO $$
BEGIN
    ASSERT (SELECT t.typtype = 'd' AND t.typbasetype = 'text'::regtype
              FROM pg_catalog.pg_type AS t
             WHERE t.oid = 'runq.event_type'::regtype);
    ASSERT EXISTS (SELECT FROM pg_catalog.pg_constraint AS c
                    WHERE c.contypid = 'runq.event_type'::regtype AND c.contype = 'c');
END $$;

ROLLBACK;
