-- The checks every runq function passes. Each verify/function_*.sql names
-- its function and includes this file:
--
--     \set function 'runq.heartbeat(bigint, bigint)'
--     \set callers 'runq_worker runq_admin'
--     \ir lib/function.sql
--
-- function is the signature (a regprocedure), or several separated by ';'
-- (a change that creates a family of functions); callers the roles that may
-- EXECUTE it, '' for an internal function (runq._name). Optional:
--     \set body 'RETURN QUERY'   a text its source contains: which version
--                                of a reworked function is deployed
--     \set volatility v          its volatility (v, s or i)
--     \set definer true          an internal function that runs after every
--                                definer function has returned (a deferred
--                                trigger's): SECURITY DEFINER, like a public one
--
-- A public function is SECURITY DEFINER, the only way in for its callers, with
-- search_path pinned to pg_catalog, pg_temp so that no object a caller creates
-- can stand in for one it names. An internal function runs inside those as
-- their owner: SECURITY INVOKER (definer would only give its privileges to
-- whoever is granted it by mistake), and its search_path pinned too unless its
-- body is SQL-standard (RETURN expr, BEGIN ATOMIC: pg_proc.prosqlbody), whose
-- names are bound when it is created, so no search_path can change them.
-- Every function: EXECUTE granted to exactly its callers, never to PUBLIC, nor
-- to another runq role through membership; a COMMENT (docs/API.md is made of
-- them); and no other function of its name in runq, so a rework that changed
-- the signature left no old version callable.
--
-- runq_observer is left out of that comparison unless callers names it: the
-- change grants_runq_observer grants it read functions that older changes
-- created, and verify/grants_runq_observer.sql checks its grants as one set,
-- so a function's verify holds before that change and after it.
-- runq_worker is left out of it for runq.get_run and runq.run_events in the
-- same way: grants_runq_worker_reads grants them to it (a worker settles a
-- write whose answer was lost by reading the run), and checks that.

\ir begin.sql
SET LOCAL verify.function = :'function';
SET LOCAL verify.callers = :'callers';
\if :{?body}
SET LOCAL verify.body = :'body';
\endif
\if :{?volatility}
SET LOCAL verify.volatility = :'volatility';
\endif
\if :{?definer}
SET LOCAL verify.definer = :'definer';
\endif

DO $$
DECLARE
    f regprocedure;
    callers text[] := ARRAY(SELECT r FROM regexp_split_to_table(current_setting('verify.callers'), '\s+') AS r
                             WHERE r <> '' ORDER BY r);
    -- A setting SET LOCAL once reads '' after its transaction, not NULL.
    body text := nullif(current_setting('verify.body', true), '');
    volatility text := nullif(current_setting('verify.volatility', true), '');
    definer boolean := coalesce(nullif(current_setting('verify.definer', true), '')::boolean, false);
    internal boolean := cardinality(callers) = 0;
    p pg_catalog.pg_proc;
    granted text[];
BEGIN
    FOREACH f IN ARRAY string_to_array(current_setting('verify.function'), ';')::regprocedure[] LOOP
    SELECT * INTO p FROM pg_catalog.pg_proc WHERE oid = f;
    ASSERT internal = (p.proname LIKE '\_%'),
        format('%s: runq._name is internal and has no callers, every other function has callers', f);
    ASSERT p.prosecdef = (NOT internal OR definer),
        format('%s: SECURITY %s expected', f,
               CASE WHEN internal AND NOT definer THEN 'INVOKER' ELSE 'DEFINER' END);
    ASSERT p.proconfig @> ARRAY['search_path=pg_catalog, pg_temp'] OR (internal AND p.prosqlbody IS NOT NULL),
        format('%s: search_path is not pinned to pg_catalog, pg_temp (proconfig %s)', f, p.proconfig);
    -- A NULL proacl is the default: EXECUTE for PUBLIC.
    granted := ARRAY(SELECT CASE a.grantee WHEN 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END
                       FROM pg_catalog.aclexplode(coalesce(p.proacl, pg_catalog.acldefault('f', p.proowner))) AS a
                      WHERE a.privilege_type = 'EXECUTE' AND a.grantee <> p.proowner
                        AND (a.grantee = 0 OR a.grantee::regrole::text <> 'runq_observer'
                             OR 'runq_observer' = ANY (callers))
                        AND (a.grantee = 0 OR a.grantee::regrole::text <> 'runq_worker'
                             OR p.proname NOT IN ('get_run', 'run_events')
                             OR 'runq_worker' = ANY (callers))
                      ORDER BY 1);
    ASSERT granted = callers, format('%s: EXECUTE is granted to %s, not to %s', f, granted, callers);
    ASSERT NOT EXISTS (SELECT FROM unnest(ARRAY['runq_client', 'runq_worker', 'runq_admin', 'public']) AS r
                        WHERE pg_catalog.has_function_privilege(r, f, 'EXECUTE') <> (r = ANY (callers))
                          AND NOT (r = 'runq_worker' AND p.proname IN ('get_run', 'run_events'))),
        format('%s: a role other than %s may EXECUTE it', f, callers);
    ASSERT pg_catalog.obj_description(f, 'pg_proc') IS NOT NULL, format('%s has no COMMENT', f);
    ASSERT NOT EXISTS (SELECT FROM pg_catalog.pg_proc AS o
                        WHERE o.proname = p.proname AND o.pronamespace = p.pronamespace AND o.oid <> f),
        format('%s: another function of that name is left in runq', f);
    -- pg_catalog's objects are pinned, so pg_depend records no use of them: a
    -- recorded function or operator outside runq is a look-alike the body
    -- was bound to when it was created.
    ASSERT NOT EXISTS (SELECT FROM pg_catalog.pg_depend AS d
                         LEFT JOIN pg_catalog.pg_proc AS q
                                ON d.refclassid = 'pg_catalog.pg_proc'::regclass AND q.oid = d.refobjid
                         LEFT JOIN pg_catalog.pg_operator AS o
                                ON d.refclassid = 'pg_catalog.pg_operator'::regclass AND o.oid = d.refobjid
                        WHERE d.classid = 'pg_catalog.pg_proc'::regclass AND d.objid = f
                          AND coalesce(q.pronamespace, o.oprnamespace) <> 'runq'::regnamespace),
        format('%s: its body is bound to a function or operator outside pg_catalog and runq', f);
    ASSERT body IS NULL OR strpos(p.prosrc, body) > 0, format('%s: its source lacks %L', f, body);
    ASSERT volatility IS NULL OR p.provolatile = volatility,
        format('%s: volatility %s, not %s', f, p.provolatile, volatility);
    END LOOP;
END $$;

ROLLBACK;

-- psql keeps variables for the session: the next file must not inherit these.
\unset body
\unset volatility
\unset definer
