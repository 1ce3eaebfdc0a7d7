-- Deploy runq:argument_check_usage to pg
-- requires: argument_checks

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';
SET LOCAL search_path = pg_catalog, pg_temp;

-- Usage, and a budget of it: counts of whatever a run spends, by a name the
-- caller chooses (tokens, dollars). Non-negative, so totals only grow and a
-- budget reached stays reached; at least one key, so a call says something.
-- The jsonpath finds any value that is not a number, or is below zero:
-- strict, since lax mode would unwrap an array value and pass [1]; silent,
-- so that a value that is no object answers false instead of raising.
CREATE FUNCTION runq._is_usage(value jsonb)
    RETURNS boolean
    LANGUAGE sql
    IMMUTABLE
    PARALLEL SAFE
RETURN jsonb_typeof(value) = 'object' AND value <> '{}'
       AND NOT jsonb_path_exists(value, 'strict $.* ? (@.type() != "number" || @ < 0)', '{}', true);

CREATE FUNCTION runq._check_usage(argument text, value jsonb, optional boolean DEFAULT false)
    RETURNS boolean
    LANGUAGE sql
    IMMUTABLE
    PARALLEL SAFE
RETURN CASE WHEN runq._is_usage(value) OR (optional AND value IS NULL)
            THEN true
            ELSE runq._bad_argument(argument,
                                    CASE WHEN optional THEN 'NULL or a non-empty object of non-negative numbers'
                                         ELSE 'a non-empty object of non-negative numbers' END,
                                    left(coalesce(value::text, 'NULL'), 200))
       END;

REVOKE ALL ON FUNCTION runq._is_usage(jsonb), runq._check_usage(text, jsonb, boolean) FROM PUBLIC;

COMMENT ON FUNCTION runq._is_usage(jsonb) IS
    'True for usage or a budget: a non-empty jsonb object whose values are non-negative numbers.';
COMMENT ON FUNCTION runq._check_usage(text, jsonb, boolean) IS
    'True for usage (or, optional, NULL), else 22023 naming the argument and its value.';

COMMIT;
