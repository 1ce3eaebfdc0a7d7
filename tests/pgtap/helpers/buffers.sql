-- Buffers (hit + read) one call touches, for the files that show a call
-- stays index probes however much is stored; included with \ir (tests/run
-- hands pg_prove only tests/pgtap/*.sql, so this is not a test).
-- Test-only dynamic SQL: EXPLAIN of a call given as text.
CREATE FUNCTION pg_temp.call_buffers(call text) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_plan json;
BEGIN
    EXECUTE 'EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ' || call INTO v_plan;
    RETURN (v_plan -> 0 -> 'Plan' ->> 'Shared Hit Blocks')::bigint
         + (v_plan -> 0 -> 'Plan' ->> 'Shared Read Blocks')::bigint;
END $$;
