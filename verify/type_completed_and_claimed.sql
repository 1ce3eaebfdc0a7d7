-- Verify runq:type_completed_and_claimed on pg

BEGIN;

-- completed, then runq.claim's columns, by name and type, in order.
SELECT 1 / (ARRAY(SELECT a.attname || ' ' || pg_catalog.format_type(a.atttypid, a.atttypmod)
                    FROM pg_catalog.pg_attribute AS a
                    JOIN pg_catalog.pg_type AS t ON t.typrelid = a.attrelid
                   WHERE t.oid = 'runq.completed_and_claimed'::regtype
                     AND a.attnum > 0 AND NOT a.attisdropped
                   ORDER BY a.attnum)
            = ARRAY['completed boolean', 'run_id bigint', 'epoch bigint', 'tenant_id text',
                    'session_id text', 'kind text', 'priority integer', 'payload jsonb',
                    'attempt integer', 'checkpoint jsonb', 'inputs jsonb', 'resumed boolean',
                    'lease_expires_at timestamp with time zone',
                    'deadline timestamp with time zone', 'budget jsonb', 'usage jsonb'])::integer;

ROLLBACK;
