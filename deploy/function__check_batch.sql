-- Deploy runq:function__check_batch to pg
-- requires: argument_checks

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- The argument rules of the batched worker calls (heartbeat_many,
-- complete_many): one element per run, the arrays of one length, no NULL id
-- or epoch, no run twice. Called only when a batch's fenced update did not
-- match every element (a bad batch always lands there: a NULL or repeated
-- element matches no row of its own), so a good batch pays for none of the
-- scans below. IMMUTABLE for the reason runq._bad_argument is.
CREATE FUNCTION runq._check_batch(run_ids bigint[], epochs bigint[], results jsonb[] DEFAULT NULL)
    RETURNS boolean
    LANGUAGE plpgsql
    IMMUTABLE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_runs      integer := cardinality(run_ids);
    v_as_long   text := format('an array as long as run_ids (%s)', cardinality(run_ids));
    v_repeated  bigint;
BEGIN
    IF run_ids IS NULL OR array_ndims(run_ids) > 1 THEN
        PERFORM runq._bad_argument('run_ids', 'a one-dimensional array', run_ids);
    END IF;
    IF array_ndims(epochs) > 1 THEN
        PERFORM runq._bad_argument('epochs', 'a one-dimensional array', epochs);
    END IF;
    IF array_ndims(results) > 1 THEN
        PERFORM runq._bad_argument('results', 'NULL or a one-dimensional array', results);
    END IF;
    IF epochs IS NULL OR cardinality(epochs) <> v_runs THEN
        PERFORM runq._bad_argument('epochs', v_as_long,
                                   coalesce('an array of ' || cardinality(epochs), 'NULL'));
    END IF;
    IF cardinality(results) <> v_runs THEN
        PERFORM runq._bad_argument('results', 'NULL or ' || v_as_long,
                                   'an array of ' || cardinality(results));
    END IF;
    IF array_position(run_ids, NULL) IS NOT NULL THEN
        PERFORM runq._bad_argument('run_ids', 'free of NULLs',
                                   format('NULL at position %s', array_position(run_ids, NULL)));
    END IF;
    IF array_position(epochs, NULL) IS NOT NULL THEN
        PERFORM runq._bad_argument('epochs', 'free of NULLs',
                                   format('NULL at position %s', array_position(epochs, NULL)));
    END IF;
    SELECT r INTO v_repeated FROM unnest(run_ids) AS r GROUP BY r HAVING count(*) > 1 LIMIT 1;
    IF FOUND THEN
        PERFORM runq._bad_argument('run_ids', 'free of repeats', format('run %s twice', v_repeated));
    END IF;
    RETURN true;
END
$$;

REVOKE ALL ON FUNCTION runq._check_batch(bigint[], bigint[], jsonb[]) FROM PUBLIC;

COMMENT ON FUNCTION runq._check_batch(bigint[], bigint[], jsonb[]) IS
    'Internal: true, or 22023 naming the first rule a batch of worker calls breaks: arrays of one length, one-dimensional, no NULL run_id or epoch, no run twice.';

COMMIT;
