-- Verify runq:domain_json_object on pg

BEGIN;

DO $$
BEGIN
    ASSERT (SELECT t.typtype = 'd' AND t.typbasetype = 'jsonb'::regtype
              FROM pg_catalog.pg_type AS t
             WHERE t.oid = 'runq.json_object'::regtype);
    ASSERT EXISTS (SELECT FROM pg_catalog.pg_constraint AS c
                    WHERE c.contypid = 'runq.json_object'::regtype AND c.contype = 'c');
END $$;

ROLLBACK;
