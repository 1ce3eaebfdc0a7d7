-- Deploy runq:argument_checks to pg
-- requires: schema_runq

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';
-- A SQL-standard body binds its names now, for good: to pg_catalog's, not to
-- a look-alike an earlier schema of the deploying role's path might hold (a
-- public.cardinality(integer[]) would beat pg_catalog.cardinality(anyarray)).
SET LOCAL search_path = pg_catalog, pg_temp;

-- The argument rules, each defined once, for every function that takes such
-- an argument. A check returns true or raises 22023 (invalid_parameter_value)
-- naming the argument and the value it got, through runq._bad_argument, so
-- every such error reads "<argument> must be <rule>, got <value>".
--
-- The checks are SQL functions with a SQL-standard body (RETURN): parsed once,
-- here, so no search_path can change what they call at run time, and inlined
-- by the planner into the calling expression, where they cost no call. That
-- is why they are not PL/pgSQL with a pinned search_path, which costs a call
-- and a configuration change per check (measured: about 5 us each, against
-- nothing). claim runs them on the hot path.

-- It only raises. It returns boolean so that a check reads `CASE WHEN rule
-- THEN true ELSE runq._bad_argument(...) END`: CASE evaluates no branch it
-- does not take, so a good value never reaches it. It is IMMUTABLE, and so
-- are the checks, because a mutable function in a PL/pgSQL expression costs
-- a snapshot and a command counter increment each time the expression runs
-- (claim's checks cost 2.7 % of a claim and complete cycle that way,
-- measured with bench/instructions.py), and a check calling a mutable
-- function could not be IMMUTABLE and still be inlined. The price: the
-- planner folds an immutable call whose arguments are all constants, even in
-- a branch not taken. So the last argument always derives from the checked
-- value, and every condition is made of immutable operators only: then the
-- ELSE branch is all constants only when the value is a constant, the
-- condition folds too, and only a bad value reaches the branch, rightly
-- refused while planning. (So never call a check with a constant bad value in
-- a branch that is not taken.)
-- got is polymorphic, and shown as text here, because most casts to text are
-- STABLE (they read DateStyle, IntervalStyle, the time zone): one in a
-- check's body would stop its inlining.
--
-- The rules claim tests on its hot path are also predicates (runq._is_*),
-- which the checks use: claim tests its arguments with the predicates alone,
-- and calls the checks only when one fails. A check's message and the call in
-- it are built into every expression that holds it, each transaction, and
-- that cost claim 1.6 % of a claim and complete cycle (bench/instructions.py).
--
-- A check is true or raises; it is never false. So where a caller writes
-- `check AND check`, no check can be skipped: the planner may skip an arm of
-- AND only when another is false. Never AND a check with anything else.
CREATE FUNCTION runq._bad_argument(argument text, expected text, got anyelement)
    RETURNS boolean
    LANGUAGE plpgsql
    IMMUTABLE
    PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = '22023',
        MESSAGE = format('%s must be %s, got %s', argument, expected, left(coalesce(got::text, 'NULL'), 200));
END
$$;

-- A name given by a client, within the bounds of the domain runq.identifier
-- (whose check guards the columns, with 23514 and after the fact).
CREATE FUNCTION runq._check_identifier(argument text, value text, optional boolean DEFAULT false)
    RETURNS boolean
    LANGUAGE sql
    IMMUTABLE
    PARALLEL SAFE
RETURN CASE WHEN (optional AND value IS NULL)
              OR length(value) BETWEEN 1 AND 256
            THEN true
            ELSE runq._bad_argument(argument,
                                    CASE WHEN optional THEN 'NULL or 1 to 256 characters'
                                         ELSE '1 to 256 characters' END,
                                    quote_nullable(left(value, 100)))
       END;

-- How many things to take or try (max_runs, max_attempts): at least one.
CREATE FUNCTION runq._is_count(value integer)
    RETURNS boolean
    LANGUAGE sql
    IMMUTABLE
    PARALLEL SAFE
RETURN value >= 1;

CREATE FUNCTION runq._check_count(argument text, value integer)
    RETURNS boolean
    LANGUAGE sql
    IMMUTABLE
    PARALLEL SAFE
RETURN CASE WHEN runq._is_count(value)
            THEN true
            ELSE runq._bad_argument(argument, 'at least 1', value)
       END;

-- A length of time (lease, queue_ttl), NULL meaning the
-- caller's default. The upper bound keeps now() + value finite.
CREATE FUNCTION runq._is_duration(value interval)
    RETURNS boolean
    LANGUAGE sql
    IMMUTABLE
    PARALLEL SAFE
RETURN value IS NULL OR (value > interval '0' AND value < interval '1000 years');

CREATE FUNCTION runq._check_duration(argument text, value interval)
    RETURNS boolean
    LANGUAGE sql
    IMMUTABLE
    PARALLEL SAFE
RETURN CASE WHEN runq._is_duration(value)
            THEN true
            ELSE runq._bad_argument(argument, 'positive and under 1000 years', value)
       END;

-- A document the queue keeps and hands back (payload, tool args): an object,
-- so that both sides can add keys to it later.
CREATE FUNCTION runq._check_object(argument text, value jsonb)
    RETURNS boolean
    LANGUAGE sql
    IMMUTABLE
    PARALLEL SAFE
RETURN CASE WHEN jsonb_typeof(value) = 'object'
            THEN true
            ELSE runq._bad_argument(argument, 'a jsonb object', jsonb_typeof(value))
       END;

-- A JSON value the queue keeps (a question, a state, an outcome, an input):
-- any JSON, null included, but not SQL NULL, which would say nothing.
CREATE FUNCTION runq._check_jsonb(argument text, value jsonb)
    RETURNS boolean
    LANGUAGE sql
    IMMUTABLE
    PARALLEL SAFE
RETURN CASE WHEN value IS NOT NULL
            THEN true
            ELSE runq._bad_argument(argument, 'a jsonb value', value)
       END;

-- One of a fixed set of words (recovery_policy, a tool call's idempotency),
-- given as one string, 'a, b, c': the array functions that would join a list
-- into a message are STABLE, and would stop this check's inlining.
CREATE FUNCTION runq._check_choice(argument text, value text, choices text)
    RETURNS boolean
    LANGUAGE sql
    IMMUTABLE
    PARALLEL SAFE
RETURN CASE WHEN value = ANY (string_to_array(choices, ', '))
            THEN true
            ELSE runq._bad_argument(argument, 'one of ' || choices, quote_nullable(left(value, 100)))
       END;

-- Priority classes to claim from (claim's classes): a non-empty list of
-- classes a run can have. The message names the first bad class, which may
-- stand anywhere in a long list.
CREATE FUNCTION runq._is_classes(value integer[])
    RETURNS boolean
    LANGUAGE sql
    IMMUTABLE
    PARALLEL SAFE
RETURN cardinality(value) > 0 AND array_ndims(value) = 1
    AND 0 <= ALL (value) AND 32767 >= ALL (value);

-- What claim's message shows for bad classes: the first NULL or
-- out-of-range class, which may stand anywhere in a long list, else the list
-- itself. Only for a message, so not inlined (its subquery would stop the
-- inlining of the check that calls it). IMMUTABLE although it casts an
-- integer array to text, which PostgreSQL marks STABLE: integers print the
-- same under every setting.
CREATE FUNCTION runq._first_bad_class(value integer[])
    RETURNS text
    LANGUAGE sql
    IMMUTABLE
    PARALLEL SAFE
RETURN coalesce((SELECT coalesce(c::text, 'NULL') FROM unnest(value) AS c
                  WHERE NOT coalesce(runq._is_classes(ARRAY[c]), false) LIMIT 1),
                left(value::text, 100));

CREATE FUNCTION runq._check_classes(argument text, value integer[])
    RETURNS boolean
    LANGUAGE sql
    IMMUTABLE
    PARALLEL SAFE
RETURN CASE WHEN runq._is_classes(value)
            THEN true
            ELSE runq._bad_argument(argument,
                                    'a non-empty one-dimensional array of classes between 0 and 32767',
                                    runq._first_bad_class(value))
       END;

-- Names to match (claim's kinds): NULL for any, else a non-empty list.
CREATE FUNCTION runq._is_names(value text[])
    RETURNS boolean
    LANGUAGE sql
    IMMUTABLE
    PARALLEL SAFE
RETURN value IS NULL
    OR (cardinality(value) > 0 AND array_ndims(value) = 1 AND array_position(value, NULL) IS NULL);

CREATE FUNCTION runq._check_names(argument text, value text[])
    RETURNS boolean
    LANGUAGE sql
    IMMUTABLE
    PARALLEL SAFE
RETURN CASE WHEN runq._is_names(value)
            THEN true
            ELSE runq._bad_argument(argument,
                                    'NULL or a non-empty one-dimensional array without NULLs',
                                    value)
       END;

-- A run looked up by id and not there: a NULL id is a bad argument, any
-- other a missing run. Called after the lookup found nothing, so a good id
-- costs nothing.
CREATE FUNCTION runq._run_not_found(run_id bigint)
    RETURNS void
    LANGUAGE plpgsql
    STABLE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF run_id IS NULL THEN
        PERFORM runq._bad_argument('run_id', 'given', run_id);
    END IF;
    RAISE EXCEPTION USING ERRCODE = 'RQ003', MESSAGE = format('run %s not found', run_id);
END
$$;

REVOKE ALL ON FUNCTION runq._bad_argument(text, text, anyelement), runq._check_identifier(text, text, boolean),
    runq._check_count(text, integer), runq._check_duration(text, interval),
    runq._check_object(text, jsonb), runq._check_jsonb(text, jsonb), runq._check_choice(text, text, text),
    runq._check_classes(text, integer[]), runq._first_bad_class(integer[]),
    runq._check_names(text, text[]), runq._run_not_found(bigint),
    runq._is_count(integer), runq._is_duration(interval), runq._is_classes(integer[]),
    runq._is_names(text[]) FROM PUBLIC;

COMMENT ON FUNCTION runq._bad_argument(text, text, anyelement) IS
    'Internal: raises 22023 "<argument> must be <expected>, got <got>". Never returns.';
COMMENT ON FUNCTION runq._check_identifier(text, text, boolean) IS
    'Internal: true when value is a name of 1 to 256 characters (or NULL, when optional); else raises 22023 naming argument and value.';
COMMENT ON FUNCTION runq._check_count(text, integer) IS
    'Internal: true when value is at least 1; else raises 22023 naming argument and value.';
COMMENT ON FUNCTION runq._check_duration(text, interval) IS
    'Internal: true when value is NULL (the default) or positive and under 1000 years; else raises 22023 naming argument and value.';
COMMENT ON FUNCTION runq._check_object(text, jsonb) IS
    'Internal: true when value is a jsonb object; else raises 22023 naming argument and the type it got.';
COMMENT ON FUNCTION runq._check_jsonb(text, jsonb) IS
    'Internal: true when value is a jsonb value (JSON null included), not SQL NULL; else raises 22023 naming argument.';
COMMENT ON FUNCTION runq._check_choice(text, text, text) IS
    'Internal: true when value is one of choices; else raises 22023 naming argument, the choices and value.';
COMMENT ON FUNCTION runq._check_classes(text, integer[]) IS
    'Internal: true when value is a non-empty one-dimensional array of classes between 0 and 32767; else raises 22023 naming argument and value.';
COMMENT ON FUNCTION runq._first_bad_class(integer[]) IS
    'Internal: for a message, the first NULL or out-of-range class of value, else value itself (at most 100 characters), as text.';
COMMENT ON FUNCTION runq._check_names(text, text[]) IS
    'Internal: true when value is NULL or a non-empty one-dimensional array without NULLs; else raises 22023 naming argument and value.';
COMMENT ON FUNCTION runq._is_count(integer) IS
    'Internal: value is at least 1 (NULL when value is NULL).';
COMMENT ON FUNCTION runq._is_duration(interval) IS
    'Internal: value is NULL, or positive and under 1000 years.';
COMMENT ON FUNCTION runq._is_classes(integer[]) IS
    'Internal: value is a non-empty one-dimensional array of classes between 0 and 32767 (NULL or false otherwise).';
COMMENT ON FUNCTION runq._is_names(text[]) IS
    'Internal: value is NULL, or a non-empty one-dimensional array without NULLs.';
COMMENT ON FUNCTION runq._run_not_found(bigint) IS
    'Internal: raises 22023 for a NULL run_id, else RQ003 (run not found). Never returns.';

COMMIT;
