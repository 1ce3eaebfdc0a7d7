-- Deploy runq:argument_check_class_key to pg
-- requires: argument_checks

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';
SET LOCAL search_path = pg_catalog, pg_temp;

-- A class given as the key of a pause ('10'): written as the class prints,
-- so that one class is one key ('010' would be a second pause of class 10
-- that runq._paused, comparing with priority::text, never matches). As the
-- checks of argument_checks: true or 22023 naming the value.
CREATE FUNCTION runq._check_class_key(argument text, value text)
    RETURNS boolean
    LANGUAGE sql
    IMMUTABLE
    PARALLEL SAFE
RETURN CASE WHEN value ~ '^(0|[1-9][0-9]{0,4})$'
                 AND (CASE WHEN value ~ '^(0|[1-9][0-9]{0,4})$' THEN value::integer END) <= 32767
            THEN true
            ELSE runq._bad_argument(argument, 'a class from 0 to 32767, as digits without leading zeros',
                                    quote_nullable(left(value, 100)))
       END;

REVOKE ALL ON FUNCTION runq._check_class_key(text, text) FROM PUBLIC;

COMMENT ON FUNCTION runq._check_class_key(text, text) IS
    'True for a class written as digits 0..32767 without leading zeros, else 22023 naming the value.';

COMMIT;
