-- Verify runq:comments_raises on pg

\ir lib/begin.sql

DO $$
BEGIN
    ASSERT obj_description('runq.begin_turn(bigint,bigint)'::regprocedure, 'pg_proc') LIKE '%Raises 22023 (NULL run_id or epoch%', 'begin_turn';
    ASSERT obj_description('runq.complete(bigint,bigint,jsonb)'::regprocedure, 'pg_proc') LIKE '%Raises 22023 (NULL run_id or epoch%', 'complete';
    ASSERT obj_description('runq.heartbeat(bigint,bigint)'::regprocedure, 'pg_proc') LIKE '%Raises 22023 (NULL run_id or epoch%', 'heartbeat';
    ASSERT obj_description('runq.release(bigint,bigint)'::regprocedure, 'pg_proc') LIKE '%Raises 22023 (NULL run_id or epoch%', 'release';
    ASSERT obj_description('runq.fail(bigint,bigint,jsonb)'::regprocedure, 'pg_proc') LIKE '%Raises 22023 (NULL run_id or epoch%', 'fail';
END $$;

ROLLBACK;
