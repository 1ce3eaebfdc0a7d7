-- Deploy runq:wake_idle to pg
-- requires: schema_runq

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- A new run's NOTIFY runq only while a worker may be idle. PostgreSQL
-- commits the transactions that notify one at a time, each through its WAL
-- flush: with synchronous_commit on, a NOTIFY in every submit cost 40-50 %
-- of the submit rate. A worker needs waking only when it is waiting, and a
-- worker waits only after a claim returned fewer runs than it asked for:
-- such a claim marks the workers idle (runq._mark_idle), and for a minute
-- after it a run inserted claimable notifies when its transaction commits
-- (runq._wake_idle, the trigger runs_wake). A worker that waits claims again
-- within the minute (the clients poll every second), which marks them again.
--
-- No wake-up is lost between the two: a committing transaction takes the
-- wake lock shared before it reads the mark and holds it through its commit;
-- a claim that marks the workers idle then takes the lock exclusive (waiting
-- for those commits) and looks once more. A transaction that read the mark
-- before it was set has committed by then, and the claim sees its run.

-- The time (ms since 1970) of the last claim that came back short. A
-- sequence, not a row: setval and its read are not transactional, so the
-- mark is seen at once by every transaction whatever its snapshot, and
-- writing it takes no row lock.
CREATE SEQUENCE runq.idle_mark AS bigint MINVALUE 0 START 0 NO CYCLE;

COMMENT ON SEQUENCE runq.idle_mark IS 'When a claim last came back short (ms since 1970): for a minute after it, a run submitted ready now sends NOTIFY runq.';

CREATE FUNCTION runq._wake_lock()
    RETURNS bigint
    LANGUAGE sql
    IMMUTABLE
    PARALLEL SAFE
RETURN hashtextextended('runq wake', 0);

COMMENT ON FUNCTION runq._wake_lock() IS 'The advisory lock key that orders a wake-up''s check of the idle mark before a claim''s last look: shared by committing wake-ups, exclusive for a moment by runq._mark_idle.';

-- Called by runq.claim when it returns fewer runs than asked for, before it
-- looks once more. Sets the mark at most once a second (each setval writes
-- WAL), which keeps it within a second of the newest short claim.
CREATE FUNCTION runq._mark_idle()
    RETURNS void
    LANGUAGE plpgsql
    VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now bigint := (extract(epoch FROM clock_timestamp()) * 1000)::bigint;
BEGIN
    IF coalesce(pg_sequence_last_value('runq.idle_mark'), 0) < v_now - 1000 THEN
        PERFORM setval('runq.idle_mark', v_now);
    END IF;
    -- Session-level, released at once: waits for every wake-up that read the
    -- mark before it was set to commit, and holds up no other claim.
    PERFORM pg_advisory_lock(runq._wake_lock());
    PERFORM pg_advisory_unlock(runq._wake_lock());
END
$$;

COMMENT ON FUNCTION runq._mark_idle() IS 'Internal: marks the workers idle (runq.idle_mark) for a short claim, then waits for every committing wake-up that read the mark before.';

-- The constraint trigger runs_wake's function, at commit, for each run
-- inserted claimable. Takes the wake lock shared until the commit ends; a
-- NOTIFY that several rows send is folded into one. SECURITY DEFINER, unlike
-- the other internal functions: it fires at commit, after the definer
-- function that inserted the run has returned, as the caller's role, which
-- may not read runq.idle_mark. A trigger function cannot be called directly.
CREATE FUNCTION runq._wake_idle()
    RETURNS trigger
    LANGUAGE plpgsql
    VOLATILE
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pg_advisory_xact_lock_shared(runq._wake_lock());
    IF pg_sequence_last_value('runq.idle_mark')
           >= (extract(epoch FROM clock_timestamp()) * 1000)::bigint - 60000 THEN
        PERFORM pg_notify('runq', '');
    END IF;
    RETURN NULL;
END
$$;

COMMENT ON FUNCTION runq._wake_idle() IS 'Internal: the trigger function of runs_wake: NOTIFY runq if a claim came back short in the last minute (runq.idle_mark).';

REVOKE ALL ON FUNCTION runq._wake_lock() FROM PUBLIC;
REVOKE ALL ON FUNCTION runq._mark_idle() FROM PUBLIC;
REVOKE ALL ON FUNCTION runq._wake_idle() FROM PUBLIC;
REVOKE ALL ON SEQUENCE runq.idle_mark FROM PUBLIC;

COMMIT;
