-- Deploy runq:type_child_info to pg
-- requires: schema_runq

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- The rows of runq.children. A type of its own, not RETURNS TABLE: the
-- function's argument is named run_id, and a function's arguments and result
-- columns share one namespace.
CREATE TYPE runq.child_info AS (
    key       text,
    run_id    bigint,
    kind      text,
    status    text,
    result    jsonb,
    failure   jsonb,
    usage     jsonb
);

COMMENT ON TYPE runq.child_info IS
    'A row of runq.children: the key a child was spawned under, its run_id, kind, status, result, failure, and usage totals (its descendants'' included).';

COMMIT;
