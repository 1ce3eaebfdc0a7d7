-- Deploy runq:admission to pg
-- requires: column_runs_parked
-- requires: index_runs_queued_tenant
-- requires: index_runs_queued_kind
-- requires: index_runs_running_tenant
-- requires: index_runs_running_kind
-- requires: table_limit_settings
-- requires: table_pause_settings

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- How concurrency limits and pauses are enforced without costing the claim.
--
-- A queued run is either admitted (claimable: in runs_claimable_idx) or
-- parked (runs.parked, in no index the claim reads). For every limited key
-- (a tenant or a kind with a limit) the runs it counts, running ones and
-- admitted queued ones, never outnumber its limit. So a claim may take any
-- admitted run and never exceed a limit; it checks nothing and skips nothing,
-- and a saturated tenant's backlog is out of its way. What keeps the rule:
--   * a run entering 'queued' from outside (submit, deliver_input, redrive)
--     is admitted only if its keys have room, counted while holding each
--     key's lock (runq._admissible: a BEFORE INSERT trigger for submits,
--     runq._requeued for the others); the claim moves a run from admitted to
--     running and changes no count;
--   * a run leaving its slot hands it to the oldest parked run that needs
--     nothing but that slot (runq._slot_left), which changes no count
--     either, so it needs no key's lock and no count;
--   * what needs a count and finds a key busy, or needs counting after a
--     hand-on (a parked run whose other key differs), is left to the next
--     sweep (runq._rebalance), which also admits runs whose time came, and
--     to a claim that came back short (runq._swap_in).
-- Runs enter the queue under READ COMMITTED only, when a limit or a pause
-- is set: a count (and the settings) read with an older snapshot could
-- admit past a limit or under a pause committed since.
-- Calls, not triggers, for the updates: an AFTER UPDATE row trigger on runs,
-- even one that returns at once, cost every claim and complete some 50 us
-- (bench/cpu.py: a cycle 412 us against 272 us without; each function that
-- moves a run out of a slot or back into the queue calls these instead).
-- Everything that reads the limits or pauses to admit takes the settings lock
-- shared; set_limit, pause and resume take it exclusive, so no admission
-- straddles a change of the rules.
--
-- Advisory locks, transaction-scoped: the settings lock, then a tenant's,
-- then a kind's; within one admission a waiting lock is only ever taken in
-- that order, and others only with a try. Two transactions that each admit
-- runs of two keys, in opposite orders, can still deadlock (40P01), as two
-- that update two rows in opposite orders can.

-- The effective limit of a key: its own row, else its scope's default; NULL
-- when unlimited. These helpers are PL/pgSQL, not SQL: a SQL function whose
-- body holds a subquery is never inlined, and is planned again at every
-- call (~100 us), where PL/pgSQL keeps its plans for the session (~5 us).
CREATE FUNCTION runq._limit_of(scope text, key text)
    RETURNS bigint
    LANGUAGE plpgsql
    STABLE
    PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN (SELECT l.max_running
              FROM runq.limit_settings AS l
             WHERE l.scope = _limit_of.scope
               AND (l.key = _limit_of.key OR l.key IS NULL)
             ORDER BY l.key IS NULL
             LIMIT 1);
END
$$;

-- The runs a key's limit counts, running and queued but admitted, counted
-- up to up_to (the limit: whether a key has room never needs more), so an
-- admission reads at most a limit's worth of index entries however deep the
-- key's backlog. Index probes only, whatever the statistics say: planned on
-- a table that looked empty (a fresh database, a bulk load in one
-- transaction), a scan of all of runs per admission made loads quadratic.
CREATE FUNCTION runq._taken(scope text, key text, up_to bigint)
    RETURNS bigint
    LANGUAGE plpgsql
    STABLE
    PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    SET enable_seqscan = off
AS $$
BEGIN
    IF scope = 'tenant' THEN
        RETURN least(up_to,
                     (SELECT count(*) FROM runq.runs AS r
                       WHERE r.tenant_id = _taken.key AND r.status = 'running' AND r.lease IS NOT NULL)
                     + (SELECT count(*) FROM (SELECT FROM runq.runs AS r
                                               WHERE NOT r.parked AND r.tenant_id = _taken.key
                                                 AND r.status = 'queued'
                                               LIMIT up_to) AS q));
    END IF;
    RETURN least(up_to,
                 (SELECT count(*) FROM runq.runs AS r
                   WHERE r.kind = _taken.key AND r.status = 'running' AND r.lease IS NOT NULL)
                 + (SELECT count(*) FROM (SELECT FROM runq.runs AS r
                                           WHERE NOT r.parked AND r.kind = _taken.key
                                             AND r.status = 'queued'
                                           LIMIT up_to) AS q));
END
$$;

CREATE FUNCTION runq._paused(priority integer, kind text, tenant_id text)
    RETURNS boolean
    LANGUAGE plpgsql
    STABLE
    PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN EXISTS (SELECT FROM runq.pause_settings AS p
                    WHERE (p.scope = 'class' AND p.key = _paused.priority::text)
                       OR (p.scope = 'kind' AND p.key = _paused.kind)
                       OR (p.scope = 'tenant' AND p.key = _paused.tenant_id));
END
$$;

-- A count taken after a key's lock is exact only if the statement's snapshot
-- is newer than the lock: so under READ COMMITTED only. In a REPEATABLE READ
-- or SERIALIZABLE transaction a run may not enter the queue while limits or
-- pauses are set (runq._admissible raises 25000), and the sweep and the
-- claim's slow path admit nothing.
CREATE FUNCTION runq._counts_are_fresh()
    RETURNS boolean
    LANGUAGE sql
    STABLE
    PARALLEL SAFE
RETURN current_setting('transaction_isolation') = 'read committed';

-- The lock of the limits and pauses, and of one key. The key's lock is held
-- by whoever counts it to admit; a hash collision only serializes two keys.
CREATE FUNCTION runq._settings_lock()
    RETURNS bigint
    LANGUAGE sql
    IMMUTABLE
    PARALLEL SAFE
RETURN hashtextextended('runq settings', 0);

-- set_limit, pause and resume take the settings lock exclusive by trying,
-- for up to 2 s, and never queue for it: a waiting exclusive request would
-- make every submit of every tenant queue behind it (and behind whatever
-- open transaction it waits for). 55P03 when the wait runs out.
CREATE FUNCTION runq._lock_settings()
    RETURNS void
    LANGUAGE plpgsql
    VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    FOR i IN 1..200 LOOP
        IF pg_try_advisory_xact_lock(runq._settings_lock()) THEN
            RETURN;
        END IF;
        PERFORM pg_sleep(0.01);
    END LOOP;
    RAISE EXCEPTION USING ERRCODE = '55P03',
        MESSAGE = 'the limits and pauses stayed busy for 2 s',
        DETAIL = 'A transaction that submitted or requeued a run, or changed a limit or a pause, is still open.',
        HINT = 'Try again once it has ended.';
END
$$;

CREATE FUNCTION runq._key_lock(scope text, key text)
    RETURNS bigint
    LANGUAGE sql
    IMMUTABLE
    PARALLEL SAFE
RETURN hashtextextended('runq ' || scope || ' ' || key, 0);

-- Takes one unit of a lowered limit's debt from each key of a run leaving its
-- slot; true when there was one to take (the slot then goes to nobody).
-- Callers look first whether runq.limit_debts holds any row at all: it is
-- empty but for a while after a limit was lowered below its running count.
CREATE FUNCTION runq._pay_debt(tenant_id text, kind text)
    RETURNS boolean
    LANGUAGE plpgsql
    VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_paid boolean;
BEGIN
    WITH owed AS (
        SELECT d.scope, d.key, d.debt
          FROM runq.limit_debts AS d
         WHERE (d.scope, d.key) IN (('tenant', _pay_debt.tenant_id), ('kind', _pay_debt.kind))
           FOR UPDATE
    ), paid AS (
        DELETE FROM runq.limit_debts AS d
         USING owed AS o
         WHERE d.scope = o.scope AND d.key = o.key AND o.debt = 1
    ), lowered AS (
        UPDATE runq.limit_debts AS d
           SET debt = d.debt - 1
          FROM owed AS o
         WHERE d.scope = o.scope AND d.key = o.key AND o.debt > 1
    )
    SELECT count(*) > 0 INTO v_paid FROM owed;
    RETURN v_paid;
END
$$;

-- May a run with these keys be admitted now? Not under a pause; always when
-- no limit applies; under a limit, only once due (a run scheduled for later
-- would hold a slot it cannot use) and only while each limited key has room
-- for it. counted: the run is already among those its keys count (queued and
-- not parked, as after the status update that brought it back). Takes the
-- settings lock shared and each limited key's lock, tenant first, held to
-- the end of the transaction, so the run it admits counts for the next.
CREATE FUNCTION runq._admissible(tenant_id text, kind text, priority integer,
                                 ready_at timestamptz, counted boolean)
    RETURNS boolean
    LANGUAGE plpgsql
    VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_tenant_limit  bigint;
    v_kind_limit    bigint;
    v_self          integer := CASE WHEN counted THEN 1 ELSE 0 END;
BEGIN
    PERFORM pg_advisory_xact_lock_shared(runq._settings_lock());
    -- No limit and no pause anywhere: the submit of a queue that uses
    -- neither pays these two probes of empty tables, and nothing else.
    IF NOT EXISTS (SELECT FROM runq.limit_settings) AND NOT EXISTS (SELECT FROM runq.pause_settings) THEN
        RETURN true;
    END IF;
    IF NOT runq._counts_are_fresh() THEN
        RAISE EXCEPTION USING ERRCODE = '25000',
            MESSAGE = format('a run enters the queue under %s isolation while limits or pauses are set',
                             current_setting('transaction_isolation')),
            DETAIL = 'Its admission counts what other transactions committed, which an older snapshot does not see.',
            HINT = 'Submit, deliver input and redrive under READ COMMITTED (the default).';
    END IF;
    IF runq._paused(priority, kind, tenant_id) THEN
        RETURN false;
    END IF;
    v_tenant_limit := runq._limit_of('tenant', tenant_id);
    v_kind_limit := runq._limit_of('kind', kind);
    IF v_tenant_limit IS NULL AND v_kind_limit IS NULL THEN
        RETURN true;
    END IF;
    IF ready_at > clock_timestamp() THEN
        RETURN false;
    END IF;
    IF v_tenant_limit IS NOT NULL THEN
        PERFORM pg_advisory_xact_lock(runq._key_lock('tenant', tenant_id));
        IF runq._taken('tenant', tenant_id, v_tenant_limit + v_self) >= v_tenant_limit + v_self THEN
            RETURN false;
        END IF;
    END IF;
    IF v_kind_limit IS NOT NULL THEN
        PERFORM pg_advisory_xact_lock(runq._key_lock('kind', kind));
        IF runq._taken('kind', kind, v_kind_limit + v_self) >= v_kind_limit + v_self THEN
            RETURN false;
        END IF;
    END IF;
    RETURN true;
END
$$;

-- Admits the parked runs of one limited key, oldest in claim order first,
-- while it has room; each run also needs room in its other key, tried, not
-- waited for. Looks at most room + 1000 runs: the rest waits for the next
-- call. Returns how many it admitted.
CREATE FUNCTION runq._admit_parked(scope text, key text, wait boolean)
    RETURNS integer
    LANGUAGE plpgsql
    VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_limit     bigint;
    v_room      bigint;
    v_admitted  integer := 0;
    v_run       record;
BEGIN
    IF NOT runq._counts_are_fresh() THEN
        RETURN 0;
    END IF;
    -- The locks first (the settings lock only tried when not waiting: a
    -- waiting pause would otherwise queue it behind every row lock held),
    -- then the limit and the count, each in a statement of its own.
    IF wait THEN
        PERFORM pg_advisory_xact_lock_shared(runq._settings_lock());
        PERFORM pg_advisory_xact_lock(runq._key_lock(scope, key));
    ELSIF NOT pg_try_advisory_xact_lock_shared(runq._settings_lock())
          OR NOT pg_try_advisory_xact_lock(runq._key_lock(scope, key)) THEN
        RETURN 0;
    END IF;
    v_limit := runq._limit_of(scope, key);
    IF v_limit IS NULL THEN
        RETURN 0;
    END IF;
    v_room := v_limit - runq._taken(scope, key, v_limit);
    IF v_room <= 0 THEN
        RETURN 0;
    END IF;
    FOR v_run IN
        SELECT r.run_id, r.tenant_id::text AS tenant_id, r.kind::text AS kind
          FROM runq.runs AS r
         WHERE r.parked AND r.status = 'queued'
           AND CASE _admit_parked.scope WHEN 'tenant' THEN r.tenant_id = _admit_parked.key
                                        ELSE r.kind = _admit_parked.key END
           AND r.ready_at <= clock_timestamp()
           AND NOT runq._paused(r.priority, r.kind, r.tenant_id)
         ORDER BY r.priority, r.ready_at, r.run_id
         LIMIT v_room + 1000
           FOR UPDATE SKIP LOCKED
    LOOP
        -- The other key of this run: room there too, or the next run.
        CONTINUE WHEN NOT (CASE _admit_parked.scope
            WHEN 'tenant' THEN runq._room_tried('kind', v_run.kind)
            ELSE runq._room_tried('tenant', v_run.tenant_id) END);
        UPDATE runq.runs AS r SET parked = false, updated_at = clock_timestamp()
         WHERE r.run_id = v_run.run_id;
        v_admitted := v_admitted + 1;
        v_room := v_room - 1;
        EXIT WHEN v_room = 0;
    END LOOP;
    IF v_admitted > 0 THEN
        PERFORM pg_notify('runq', '');
    END IF;
    RETURN v_admitted;
END
$$;

-- Room in a key for one more run, its lock only tried: true when unlimited,
-- or locked and under its limit.
CREATE FUNCTION runq._room_tried(scope text, key text)
    RETURNS boolean
    LANGUAGE plpgsql
    VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_limit bigint := runq._limit_of(scope, key);
BEGIN
    IF v_limit IS NULL THEN
        RETURN true;
    END IF;
    -- The lock first, in a statement of its own, and the count after it:
    -- counted in the same expression, the count would use a snapshot taken
    -- before the lock, and miss an admission committed in between.
    IF NOT (runq._counts_are_fresh() AND pg_try_advisory_xact_lock(runq._key_lock(scope, key))) THEN
        RETURN false;
    END IF;
    RETURN runq._taken(scope, key, v_limit) < v_limit;
END
$$;

-- Puts right what admissions left: parked runs whose keys have room (a run
-- now due, a slot freed while its key's lock was busy, a limit raised), and
-- debts the counts have paid. thorough (set_limit, resume) also frees every
-- parked run that no limit or pause holds any more, reading all parked runs,
-- and waits for busy keys; the sweep only tries them.
CREATE FUNCTION runq._rebalance(thorough boolean)
    RETURNS void
    LANGUAGE plpgsql
    VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_key     text;
    v_freed   bigint;
BEGIN
    IF thorough THEN
        UPDATE runq.runs AS r
           SET parked = false, updated_at = clock_timestamp()
         WHERE r.parked AND r.status = 'queued'
           AND runq._limit_of('tenant', r.tenant_id) IS NULL
           AND runq._limit_of('kind', r.kind) IS NULL
           AND NOT runq._paused(r.priority, r.kind, r.tenant_id);
        GET DIAGNOSTICS v_freed = ROW_COUNT;
        IF v_freed > 0 THEN
            PERFORM pg_notify('runq', '');
        END IF;
    END IF;
    -- The tenants, then the kinds, with parked runs: one index probe each (a
    -- loose scan of runs_queued_tenant_idx, then of runs_queued_kind_idx),
    -- however many runs they park. Two statements, as each reads its index.
    FOR v_key IN
        WITH RECURSIVE t (key) AS (
            (SELECT r.tenant_id::text FROM runq.runs AS r
              WHERE r.parked AND r.status = 'queued'
              ORDER BY r.tenant_id LIMIT 1)
            UNION ALL
            SELECT (SELECT r.tenant_id::text FROM runq.runs AS r
                     WHERE r.parked AND r.status = 'queued' AND r.tenant_id > t.key
                     ORDER BY r.tenant_id LIMIT 1)
              FROM t WHERE t.key IS NOT NULL)
        SELECT t.key FROM t WHERE t.key IS NOT NULL
    LOOP
        PERFORM runq._admit_parked('tenant', v_key, thorough);
    END LOOP;
    FOR v_key IN
        WITH RECURSIVE k (key) AS (
            (SELECT r.kind::text FROM runq.runs AS r
              WHERE r.parked AND r.status = 'queued'
              ORDER BY r.kind LIMIT 1)
            UNION ALL
            SELECT (SELECT r.kind::text FROM runq.runs AS r
                     WHERE r.parked AND r.status = 'queued' AND r.kind > k.key
                     ORDER BY r.kind LIMIT 1)
              FROM k WHERE k.key IS NOT NULL)
        SELECT k.key FROM k WHERE k.key IS NOT NULL
    LOOP
        PERFORM runq._admit_parked('kind', v_key, thorough);
    END LOOP;
    -- A debt is what the running runs exceed their limit by; once the count
    -- says less, the rest is forgiven.
    IF EXISTS (SELECT FROM runq.limit_debts) AND runq._counts_are_fresh() THEN
        -- One statement, so one snapshot decides both.
        WITH owed AS (
            SELECT d.scope, d.key, d.debt,
                   runq._taken(d.scope, d.key, runq._limit_of(d.scope, d.key) + d.debt)
                   - runq._limit_of(d.scope, d.key) AS now_owed
              FROM runq.limit_debts AS d
        ), forgiven AS (
            DELETE FROM runq.limit_debts AS d
             USING owed AS o
             WHERE d.scope = o.scope AND d.key = o.key AND coalesce(o.now_owed, 0) <= 0
        )
        UPDATE runq.limit_debts AS d
           SET debt = o.now_owed
          FROM owed AS o
         WHERE d.scope = o.scope AND d.key = o.key AND o.now_owed > 0 AND o.now_owed < d.debt;
    END IF;
END
$$;

-- BEFORE INSERT: a new run is admitted or parked before it is written.
CREATE FUNCTION runq._park_on_entry()
    RETURNS trigger
    LANGUAGE plpgsql
    VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    -- ready_at is a generated column: not computed yet before the row is.
    NEW.parked := NOT runq._admissible(NEW.tenant_id, NEW.kind, NEW.priority,
                                       coalesce(NEW.scheduled_for, NEW.created_at), false);
    RETURN NEW;
END
$$;

-- A run put back into 'queued' from another status: parks it if it may not
-- stay admitted, in a second update of the row (in the same transaction, so
-- no claim sees it between the two). Called by the functions that requeue,
-- right after their update. A run coming back from running (a release, a
-- requeue: from_running) keeps its slot: it is parked only under a pause, or
-- to pay a lowered limit's debt. A run coming back from waiting_for_user or
-- failed needs admitting. Returns true.
CREATE FUNCTION runq._requeued(run_id bigint, from_running boolean)
    RETURNS boolean
    LANGUAGE plpgsql
    VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_run   record;
    v_park  boolean;
BEGIN
    IF NOT EXISTS (SELECT FROM runq.limit_settings) AND NOT EXISTS (SELECT FROM runq.pause_settings) THEN
        RETURN true;
    END IF;
    SELECT r.tenant_id::text AS tenant_id, r.kind::text AS kind, r.priority::integer AS priority,
           r.ready_at, r.parked
      INTO v_run
      FROM runq.runs AS r
     WHERE r.run_id = _requeued.run_id AND r.status = 'queued';
    IF NOT FOUND THEN
        RETURN true;
    END IF;
    IF from_running THEN
        PERFORM pg_advisory_xact_lock_shared(runq._settings_lock());
        v_park := runq._paused(v_run.priority, v_run.kind, v_run.tenant_id)
                  OR (EXISTS (SELECT FROM runq.limit_debts)
                      AND runq._pay_debt(v_run.tenant_id, v_run.kind));
    ELSE
        v_park := NOT runq._admissible(v_run.tenant_id, v_run.kind, v_run.priority, v_run.ready_at,
                                       NOT v_run.parked);
    END IF;
    IF v_park IS DISTINCT FROM v_run.parked THEN
        UPDATE runq.runs AS r SET parked = v_park WHERE r.run_id = _requeued.run_id;
    END IF;
    RETURN true;
END
$$;

-- A run that left its slot (running, or admitted and queued, to anything
-- but those), called by the function that moved it, right after its update
-- and only when a limit is set: the slot goes to the oldest due parked
-- run of the same limited key whose other key is the same or unlimited, so
-- no count changes and no key's lock is needed; a lowered limit's debt is
-- paid first. Parked runs that need a count are left to the sweep.
CREATE FUNCTION runq._slot_left(tenant_id text, kind text)
    RETURNS boolean
    LANGUAGE plpgsql
    VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_tenant_limit  bigint;
    v_kind_limit    bigint;
BEGIN
    -- The limits: a key's own row, else its scope's default (runq._limit_of's
    -- lookup, written in place as two index probes: each call of a helper
    -- costs a plan's run and a change of search_path).
    SELECT coalesce((SELECT m.max_running FROM runq.limit_settings AS m
                      WHERE m.scope = 'tenant' AND m.key = _slot_left.tenant_id),
                    (SELECT m.max_running FROM runq.limit_settings AS m
                      WHERE m.scope = 'tenant' AND m.key IS NULL)),
           coalesce((SELECT m.max_running FROM runq.limit_settings AS m
                      WHERE m.scope = 'kind' AND m.key = _slot_left.kind),
                    (SELECT m.max_running FROM runq.limit_settings AS m
                      WHERE m.scope = 'kind' AND m.key IS NULL))
      INTO v_tenant_limit, v_kind_limit;
    IF v_tenant_limit IS NULL AND v_kind_limit IS NULL THEN
        RETURN true;
    END IF;
    IF EXISTS (SELECT FROM runq.limit_debts) AND runq._pay_debt(_slot_left.tenant_id, _slot_left.kind) THEN
        RETURN true;
    END IF;
    -- Tried, not waited for: this runs with the ended run's row locked, and a
    -- pause waiting for the lock may be waiting for that row too. Busy: the
    -- slot stays free for the next claim's swap or the sweep.
    IF NOT pg_try_advisory_xact_lock_shared(runq._settings_lock()) THEN
        RETURN true;
    END IF;
    -- No count here, ever: the rows of one statement (complete_many, a sweep)
    -- are all updated before the first of them gets here, so a count would
    -- see the slots the later rows are about to hand on, and give them twice.
    -- Parked runs that need a count of their other key wait for the sweep.
    -- Only a limited key's parked runs are read: under a snapshot held for
    -- long, a read steps over the entries its key's admissions left behind.
    -- No NOTIFY: the worker that ended the run has a free slot and claims
    -- again (a NOTIFY in every such commit would also serialize them).
    IF v_tenant_limit IS NOT NULL THEN
        UPDATE runq.runs AS r SET parked = false, updated_at = clock_timestamp()
         WHERE r.run_id = (SELECT c.run_id
                             FROM runq.runs AS c
                            WHERE c.parked AND c.status = 'queued'
                              AND c.tenant_id = _slot_left.tenant_id
                              AND (c.kind = _slot_left.kind OR runq._limit_of('kind', c.kind) IS NULL)
                              AND c.ready_at <= clock_timestamp()
                              AND (NOT EXISTS (SELECT FROM runq.pause_settings)
                                   OR NOT runq._paused(c.priority, c.kind, c.tenant_id))
                            ORDER BY c.priority, c.ready_at, c.run_id
                            LIMIT 1
                              FOR UPDATE SKIP LOCKED);
    ELSE
        UPDATE runq.runs AS r SET parked = false, updated_at = clock_timestamp()
         WHERE r.run_id = (SELECT c.run_id
                             FROM runq.runs AS c
                            WHERE c.parked AND c.status = 'queued'
                              AND c.kind = _slot_left.kind
                              AND (c.tenant_id = _slot_left.tenant_id
                                   OR runq._limit_of('tenant', c.tenant_id) IS NULL)
                              AND c.ready_at <= clock_timestamp()
                              AND (NOT EXISTS (SELECT FROM runq.pause_settings)
                                   OR NOT runq._paused(c.priority, c.kind, c.tenant_id))
                            ORDER BY c.priority, c.ready_at, c.run_id
                            LIMIT 1
                              FOR UPDATE SKIP LOCKED);
    END IF;
    RETURN true;
END
$$;

REVOKE ALL ON FUNCTION runq._limit_of(text, text), runq._taken(text, text, bigint), runq._counts_are_fresh(),
    runq._paused(integer, text, text), runq._settings_lock(), runq._lock_settings(),
    runq._key_lock(text, text),
    runq._pay_debt(text, text), runq._admissible(text, text, integer, timestamptz, boolean),
    runq._admit_parked(text, text, boolean), runq._room_tried(text, text),
    runq._rebalance(boolean), runq._park_on_entry(), runq._requeued(bigint, boolean),
    runq._slot_left(text, text)
    FROM PUBLIC;

COMMENT ON FUNCTION runq._limit_of(text, text) IS
    'The concurrency limit that applies to a tenant or kind: its own row, else the scope''s default; NULL when unlimited.';
COMMENT ON FUNCTION runq._taken(text, text, bigint) IS
    'How many runs a key''s limit counts now (running, and queued but admitted), counted up to up_to.';
COMMENT ON FUNCTION runq._paused(integer, text, text) IS
    'Whether a pause holds a run of this class, kind and tenant.';
COMMENT ON FUNCTION runq._counts_are_fresh() IS
    'Whether a count taken after a lock sees every commit before it: under READ COMMITTED only.';
COMMENT ON FUNCTION runq._settings_lock() IS
    'The advisory lock key of the limits and pauses: shared by admissions, exclusive for set_limit, pause and resume.';
COMMENT ON FUNCTION runq._lock_settings() IS
    'Takes the settings lock exclusive by trying for up to 2 s, never queueing; 55P03 after.';
COMMENT ON FUNCTION runq._key_lock(text, text) IS
    'The advisory lock key of one tenant or kind, held by whoever counts it to admit a run.';
COMMENT ON FUNCTION runq._pay_debt(text, text) IS
    'Takes one unit of a lowered limit''s debt from the keys of a run leaving its slot; true when there was one.';
COMMENT ON FUNCTION runq._admissible(text, text, integer, timestamptz, boolean) IS
    'Whether a run with these keys may be admitted now, holding the locks of its limited keys until commit.';
COMMENT ON FUNCTION runq._admit_parked(text, text, boolean) IS
    'Admits parked runs of one limited key in claim order while it has room; returns how many.';
COMMENT ON FUNCTION runq._room_tried(text, text) IS
    'Room for one more run in a key whose lock is only tried: true when unlimited, or locked and under its limit.';
COMMENT ON FUNCTION runq._rebalance(boolean) IS
    'Admits parked runs whose keys have room and settles debts; thorough also frees runs no limit or pause holds.';
COMMENT ON FUNCTION runq._park_on_entry() IS
    'Trigger: decides whether a new run is admitted or parked.';
COMMENT ON FUNCTION runq._requeued(bigint, boolean) IS
    'Parks a run just put back into the queue if it may not stay admitted (a pause, a debt, a key without room); true.';
COMMENT ON FUNCTION runq._slot_left(text, text) IS
    'Hands the slot a run of this tenant and kind just left to the oldest parked run that needs only that slot; true.';

COMMIT;
