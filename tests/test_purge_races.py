"""runq.purge against the two calls that can meet a run while it is deleted.

A purge deletes a finished run with its events and its idempotency key. Two
other paths touch such a run without changing it: a stale worker's write,
which logs run.fenced (run_events has no foreign key to runs), and a submit
that repeats the run's idempotency key. Each race is forced, not hoped for:
the other call is held inside its transaction, or parked inside the server,
at the racy point while the purge runs, on real connections to a real server.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg

Connect = Callable[[], psycopg.Connection[Any]]
GATE = 35_001  # advisory lock key the parked submit waits on
WAIT = 30.0


def finished_run(conn: psycopg.Connection[Any], **submit: Any) -> int:
    key = submit.get("idempotency_key")
    run = conn.execute("SELECT run_id FROM runq.submit('race', 'k', idempotency_key => %s)",
                       [key]).fetchone()[0]
    epoch = conn.execute("SELECT epoch FROM runq.claim(ARRAY[10])").fetchone()[0]
    assert conn.execute("SELECT runq.complete(%s, %s)", [run, epoch]).fetchone()[0] is True
    return int(run)


def purge(conn: psycopg.Connection[Any]) -> int:
    return int(conn.execute("SELECT runq.purge(interval '0')").fetchone()[0])



def test_a_fenced_event_logged_while_its_run_is_purged_goes_with_the_next_purge(
        connect: Connect) -> None:
    admin, worker = connect(), connect()
    admin.autocommit = True
    run = finished_run(admin)
    kept = finished_run(admin)
    # A zombie worker's heartbeat under the old epoch: fenced. Its run.fenced
    # event commits only after the purge has deleted the run.
    worker.autocommit = False
    assert worker.execute("SELECT runq.heartbeat(%s, 1)", [run]).fetchone()[0] is False
    assert int(admin.execute("SELECT runq.purge(interval '0', 1)").fetchone()[0]) == 1
    worker.commit()
    assert events_of(admin, run) == ["run.fenced"]   # an orphan, for now
    # The next purge deletes it, whatever else it finds; other runs keep theirs.
    assert admin.execute("SELECT runq.purge(interval '1 day')").fetchone()[0] == 0
    assert events_of(admin, run) == []
    assert events_of(admin, kept)[-1] == "run.succeeded"


def events_of(conn: psycopg.Connection[Any], run: int) -> list[str]:
    return [t for (t,) in conn.execute("SELECT type FROM runq.run_events WHERE run_id = %s"
                                       " ORDER BY event_id", [run])]


def test_a_submit_that_met_a_purged_key_takes_it_again(connect: Connect) -> None:
    admin, submitter = connect(), connect()
    admin.autocommit = submitter.autocommit = True
    old = finished_run(admin, idempotency_key="once")
    # Park the submit between its key insert (which meets the old key) and the
    # read of that key: a statement trigger that waits on an advisory lock the
    # test holds, only in the session that asks for it.
    admin.execute("""
        CREATE FUNCTION public.race_park() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF current_setting('race.park', true) = 'on' THEN
                PERFORM pg_advisory_lock_shared(35001);  -- GATE
                PERFORM pg_advisory_unlock_shared(35001);
            END IF;
            RETURN NULL;
        END $$""")
    admin.execute("CREATE TRIGGER race_park AFTER INSERT ON runq.idempotency_keys"
                  " FOR EACH STATEMENT EXECUTE FUNCTION public.race_park()")
    admin.execute("SELECT pg_advisory_lock(%s)", [GATE])
    submitter.execute("SET race.park = 'on'")
    result: list[tuple[Any, ...]] = []
    thread = threading.Thread(target=lambda: result.append(submitter.execute(
        "SELECT run_id, outcome FROM runq.submit('race', 'k', idempotency_key => 'once')"
    ).fetchone()))
    thread.start()
    deadline = time.monotonic() + WAIT
    while not admin.execute("SELECT EXISTS (SELECT FROM pg_catalog.pg_locks AS l"
                            " WHERE l.locktype = 'advisory' AND NOT l.granted"
                            " AND l.objid::bigint = %s)", [GATE]).fetchone()[0]:
        assert time.monotonic() < deadline, "the submit never reached the gate"
        time.sleep(0.01)
    # The submit has met the old key; the purge deletes it with its run.
    assert purge(admin) == 1
    admin.execute("SELECT pg_advisory_unlock(%s)", [GATE])
    thread.join(WAIT)
    assert not thread.is_alive()
    [(run, outcome)] = result
    assert outcome == "created" and run is not None and run != old, result
    assert admin.execute("SELECT run_id FROM runq.idempotency_keys WHERE idempotency_key = 'once'"
                         ).fetchone()[0] == run


def usage_rows(conn: psycopg.Connection[Any], run: int) -> int:
    return int(conn.execute("SELECT count(*) FROM runq.run_usage WHERE run_id = %s",
                            [run]).fetchone()[0])


def test_a_purge_skips_a_run_whose_usage_is_being_recorded(connect: Connect) -> None:
    admin, worker = connect(), connect()
    admin.autocommit = True
    run = finished_run(admin)
    # Spend after the end is recorded (a fenced call: false). Until it commits,
    # its hold on the run keeps the purge away: no totals left of no run.
    worker.autocommit = False
    assert worker.execute("SELECT runq.record_usage(%s, 1, '{\"cost_usd\": 0.5}')",
                          [run]).fetchone()[0] is False
    assert purge(admin) == 0
    worker.commit()
    assert usage_rows(admin, run) == 1
    assert purge(admin) == 1
    assert usage_rows(admin, run) == 0 and events_of(admin, run) == []


def test_usage_recorded_while_its_run_is_purged_finds_no_run(connect: Connect) -> None:
    admin, purger, worker = connect(), connect(), connect()
    admin.autocommit = worker.autocommit = True
    run = finished_run(admin)
    # The purge has deleted the run but not committed; the record waits for it,
    # then finds no run: RQ003, as for any unknown run, and nothing is added.
    purger.autocommit = False
    assert purge(purger) == 1
    raised: list[BaseException] = []

    def record() -> None:
        try:
            worker.execute("SELECT runq.record_usage(%s, 1, '{\"cost_usd\": 0.5}')", [run])
        except BaseException as e:  # noqa: BLE001 - handed to the test thread
            raised.append(e)

    thread = threading.Thread(target=record)
    thread.start()
    deadline = time.monotonic() + WAIT
    pid = worker.info.backend_pid
    while not admin.execute("SELECT EXISTS (SELECT FROM pg_catalog.pg_locks AS l"
                            " WHERE l.pid = %s AND NOT l.granted)", [pid]).fetchone()[0]:
        assert time.monotonic() < deadline, "the record never waited for the purge"
        time.sleep(0.01)
    purger.commit()
    thread.join(WAIT)
    assert not thread.is_alive()
    [error] = raised
    assert isinstance(error, psycopg.Error) and error.sqlstate == "RQ003", error
    assert usage_rows(admin, run) == 0
