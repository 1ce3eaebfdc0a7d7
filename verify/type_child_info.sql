-- Verify runq:type_child_info on pg

BEGIN;

-- Its columns, by name and type, in order.
SELECT 1 / (ARRAY(SELECT a.attname || ' ' || pg_catalog.format_type(a.atttypid, a.atttypmod)
                    FROM pg_catalog.pg_attribute AS a
                    JOIN pg_catalog.pg_type AS t ON t.typrelid = a.attrelid
                   WHERE t.oid = 'runq.child_info'::regtype
                     AND a.attnum > 0 AND NOT a.attisdropped
                   ORDER BY a.attnum)
            = ARRAY['key text', 'run_id bigint', 'kind text', 'status text', 'result jsonb',
                    'failure jsonb', 'usage jsonb'])::integer;

ROLLBACK;
