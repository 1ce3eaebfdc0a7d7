-- Verify runq:comment_release_deadline on pg

\ir lib/begin.sql

DO $$
BEGIN
    ASSERT obj_description('runq.release(bigint,bigint)'::regprocedure, 'pg_proc') LIKE '%deadline_exceeded%', 'release';
END $$;

ROLLBACK;
