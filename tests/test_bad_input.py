"""Bad input: every public runq function, called the way a careless
or hostile client would call it, answers with the documented SQLSTATE (22023
for a bad argument, RQ003 for an unknown run; docs/contract.md "Errors") and a
message naming the parameter and the value, and changes nothing: an md5 of
every runq table's ordered rows is the same before and after.

Where a strange input is valid by the contract (a 10 MB object, a deeply
nested one, SQL-looking or non-ASCII strings, JSON null where only SQL NULL is
refused, a NULL for an optional argument) the test says so beside the case and
asserts that it is accepted and stored intact instead.

Cases are tables. Each case names the run it needs (a fresh queued, running,
waiting or failed run, made just before the call so one case cannot disturb
another) and binds its ids as %(q)s, %(r)s/%(e)s (run and epoch), %(w)s, %(f)s,
%(cls)s (the fresh run's class, which no other run has), %(s)s (a fresh
schedule's name) and %(u)s (a string no other case uses). The tables run against one database per module; the 10 MB
and the deep cases get their own.
"""
from __future__ import annotations

import itertools
import json
import random
import string
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pgutil import create_database, drop_database, unique_name
from psycopg import sql

# -- the snapshot -------------------------------------------------------------


def snapshot(conn: psycopg.Connection) -> dict[str, str]:
    """md5 of each runq table's rows in a total order (text order of the whole
    row), by table. Sequences are left out: a rejected INSERT may use up an
    identity value, which is no change to any run."""
    tables = [r[0] for r in conn.execute(
        "SELECT c.relname FROM pg_catalog.pg_class AS c WHERE c.relnamespace = 'runq'::regnamespace"
        " AND c.relkind IN ('r', 'p') ORDER BY 1")]
    assert {"runs", "run_events", "settings", "tool_calls"} <= set(tables), tables
    query = sql.SQL(" UNION ALL ").join(
        sql.SQL("SELECT {name}, md5(coalesce(string_agg(t::text, E'\\n' ORDER BY t::text), ''))"
                " FROM runq.{table} AS t").format(name=sql.Literal(t), table=sql.Identifier(t))
        for t in tables)
    return dict(conn.execute(query).fetchall())


def test_snapshot_sees_a_change(conn: psycopg.Connection) -> None:
    # The comparison every case relies on does see a change anywhere.
    before = snapshot(conn)
    conn.execute("UPDATE runq.settings SET lease = lease + interval '1 microsecond'")
    assert snapshot(conn) != before
    before = snapshot(conn)
    conn.execute("SELECT * FROM runq.submit('snap', 'k')")
    after = snapshot(conn)
    assert after["runs"] != before["runs"] and after["run_events"] != before["run_events"]


# -- fresh runs -----------------------------------------------------------------


class World:
    """Makes fresh runs in each state, each in a class of its own."""

    def __init__(self, conn: psycopg.Connection) -> None:
        self.conn = conn
        self._classes = itertools.count(20000)
        self._names = itertools.count()

    def uniq(self) -> str:
        return f"u{next(self._names)}"

    def queued(self) -> dict[str, Any]:
        cls = next(self._classes)
        q = self.conn.execute("SELECT run_id FROM runq.submit('bad', 'k', priority => %s)",
                              [cls]).fetchone()[0]
        return {"q": q, "cls": cls}

    def running(self) -> dict[str, Any]:
        ids = self.queued()
        r, e = self.conn.execute(
            "SELECT run_id, epoch FROM runq.claim(ARRAY[%s]::integer[], lease => interval '1 hour')",
            [ids["cls"]]).fetchone()
        return {**ids, "r": r, "e": e}

    def call(self) -> dict[str, Any]:
        ids = self.running()
        assert self.conn.execute("SELECT runq.begin_tool(%s, %s, 'c1', 'search', 'read_only')",
                                 [ids["r"], ids["e"]]).fetchone()[0]
        return ids

    def waiting(self) -> dict[str, Any]:
        ids = self.running()
        assert self.conn.execute("SELECT runq.ask_user(%s, %s, '{\"q\": 1}')",
                                 [ids["r"], ids["e"]]).fetchone()[0]
        return {**ids, "w": ids["r"]}

    def failed(self) -> dict[str, Any]:
        ids = self.running()
        assert self.conn.execute("SELECT runq.fail(%s, %s, '{\"code\": \"x\"}')",
                                 [ids["r"], ids["e"]]).fetchone()[0]
        return {**ids, "f": ids["r"]}

    def schedule(self) -> dict[str, Any]:
        name = f"s{next(self._names)}"
        assert self.conn.execute("SELECT runq.create_schedule(%s, 't', 'k', cron => '17 3 * * *')",
                                 [name]).fetchone()[0]
        return {"s": name}

    def make(self, needs: str) -> dict[str, Any]:
        ids = getattr(self, needs)() if needs else {}
        return {**ids, "u": self.uniq()}


@pytest.fixture(scope="module")
def world_conn(server_url: str, template_db: str) -> Iterator[psycopg.Connection]:
    name = unique_name("runq_bad_input")
    url = create_database(server_url, name, template=template_db)
    with psycopg.connect(url, autocommit=True) as c:
        yield c
    drop_database(server_url, name)


@pytest.fixture(scope="module")
def world(world_conn: psycopg.Connection) -> World:
    return World(world_conn)


# -- cases ------------------------------------------------------------------------


@dataclass
class Case:
    id: str
    sql: str
    needs: str = ""
    sqlstate: str | None = None         # None: accepted
    names: tuple[str, ...] = ()         # must appear in the primary message
    check: str | None = None            # accepted: SQL that must return true
    params: dict[str, Any] = field(default_factory=dict)
    max_message: int | None = None      # the message stays this short


def rejected(id: str, sql: str, needs: str = "", *names: str, state: str = "22023",
             params: dict[str, Any] | None = None, max_message: int | None = None) -> Case:
    return Case(id, sql, needs, state, names, None, params or {}, max_message)


def accepted(id: str, sql: str, needs: str = "", check: str | None = None,
             params: dict[str, Any] | None = None) -> Case:
    return Case(id, sql, needs, None, (), check, params or {})


# Every public function: its arguments with a valid value each, whether NULL is
# a valid value (an optional argument whose NULL means "none" or "the
# default"), and the run it needs. An explicit NULL for a defaulted jsonb
# argument is refused (docs/contract.md, "Arguments").
SIGNATURES: list[tuple[str, str, list[tuple[str, str, str, bool]]]] = [
    ("submit", "", [
        ("tenant_id", "text", "'bad-t'", False),
        ("kind", "text", "'k'", False),
        ("payload", "jsonb", "'{}'", False),
        ("session_id", "text", "%(u)s", True),           # NULL: a run with no session
        ("priority", "integer", "21000", False),
        ("idempotency_key", "text", "%(u)s", True),      # NULL: no idempotency
        ("principal_id", "text", "'p'", True),           # NULL: a principal scope of its own
        ("scheduled_for", "timestamptz", "now()", True),  # NULL: ready now
        ("max_attempts", "integer", "3", False),
        ("recovery_policy", "text", "'resume'", False),
        ("queue_ttl", "interval", "interval '1 hour'", True),  # NULL: never expires
        ("budget", "jsonb", "'{\"cost_usd\": 2.00}'", True),   # NULL: no budget
        ("timeout", "interval", "interval '1 hour'", True),     # NULL: no deadline
    ]),
    ("deliver_input", "waiting", [("run_id", "bigint", "%(w)s", False),
                                  ("input", "jsonb", "'{\"a\": 1}'", False)]),
    ("cancel", "queued", [("run_id", "bigint", "%(q)s", False),
                          ("reason", "text", "'why'", True)]),     # NULL: no reason given
    ("get_run", "queued", [("run_id", "bigint", "%(q)s", False)]),
    ("run_events", "queued", [("run_id", "bigint", "%(q)s", False)]),
    ("tool_calls", "queued", [("run_id", "bigint", "%(q)s", False)]),
    ("watch", "queued", [("run_id", "bigint", "%(q)s", False)]),
    ("unwatch", "queued", [("run_id", "bigint", "%(q)s", False)]),
    ("read_output", "queued", [("run_id", "bigint", "%(q)s", False),
                               ("after_seq", "bigint", "0", False),
                               ("max_chunks", "integer", "10", False)]),
    ("claim", "queued", [("classes", "integer[]", "ARRAY[%(cls)s]::integer[]", False),
                         ("worker_id", "text", "'w'", True),        # NULL: anonymous worker
                         ("lease", "interval", "interval '1 hour'", True),  # NULL: settings' lease
                         ("max_runs", "integer", "1", False),
                         ("kinds", "text[]", "ARRAY['k']", True)]),  # NULL: any kind
    ("heartbeat", "running", [("run_id", "bigint", "%(r)s", False), ("epoch", "bigint", "%(e)s", False)]),
    ("complete", "running", [("run_id", "bigint", "%(r)s", False), ("epoch", "bigint", "%(e)s", False),
                             ("result", "jsonb", "'{\"ok\": 1}'", True)]),  # result may be NULL
    ("heartbeat_many", "running", [("run_ids", "bigint[]", "ARRAY[%(r)s]::bigint[]", False),
                                   ("epochs", "bigint[]", "ARRAY[%(e)s]::bigint[]", False)]),
    ("complete_many", "running", [("run_ids", "bigint[]", "ARRAY[%(r)s]::bigint[]", False),
                                  ("epochs", "bigint[]", "ARRAY[%(e)s]::bigint[]", False),
                                  # NULL: a NULL result for each run
                                  ("results", "jsonb[]", "ARRAY['{\"ok\": 1}']::jsonb[]", True)]),
    # run_id and epoch both NULL: complete nothing, only claim; one of them NULL is refused.
    ("complete_and_claim", "running", [
        ("run_id", "bigint", "%(r)s", False), ("epoch", "bigint", "%(e)s", False),
        ("result", "jsonb", "'{\"ok\": 1}'", True),                 # result may be NULL
        ("classes", "integer[]", "ARRAY[%(cls)s]::integer[]", False),
        ("worker_id", "text", "'w'", True),                           # NULL: anonymous worker
        ("lease", "interval", "interval '1 hour'", True),             # NULL: settings' lease
        ("max_runs", "integer", "1", False),
        ("kinds", "text[]", "ARRAY['k']", True),                      # NULL: any kind
        ("claim_if_fenced", "boolean", "true", True)]),               # NULL: false
    ("fail", "running", [("run_id", "bigint", "%(r)s", False), ("epoch", "bigint", "%(e)s", False),
                         ("failure", "jsonb", "'{\"code\": \"x\"}'", False)]),
    ("release", "running", [("run_id", "bigint", "%(r)s", False), ("epoch", "bigint", "%(e)s", False)]),
    ("ask_user", "running", [("run_id", "bigint", "%(r)s", False), ("epoch", "bigint", "%(e)s", False),
                             ("question", "jsonb", "'{\"q\": 1}'", False)]),
    ("checkpoint", "running", [("run_id", "bigint", "%(r)s", False), ("epoch", "bigint", "%(e)s", False),
                               ("state", "jsonb", "'{\"s\": 1}'", False)]),
    ("begin_turn", "running", [("run_id", "bigint", "%(r)s", False), ("epoch", "bigint", "%(e)s", False)]),
    ("emit", "running", [("run_id", "bigint", "%(r)s", False), ("epoch", "bigint", "%(e)s", False),
                         ("chunks", "jsonb[]", "ARRAY['\"tok\"']::jsonb[]", False)]),
    ("record_usage", "running", [("run_id", "bigint", "%(r)s", False), ("epoch", "bigint", "%(e)s", False),
                                 ("usage", "jsonb", "'{\"cost_usd\": 0.0123, \"input_tokens\": 17}'", False)]),
    ("record_model_call", "running", [
        ("run_id", "bigint", "%(r)s", False), ("epoch", "bigint", "%(e)s", False),
        ("seq", "bigint", "1", False), ("request_hash", "text", "'h1'", False),
        ("response", "jsonb", "'{\"text\": \"hi\"}'", False),
        ("usage", "jsonb", "'{\"input_tokens\": 9}'", True)]),  # NULL: nothing to add
    ("model_calls", "queued", [("run_id", "bigint", "%(q)s", False)]),
    # A child in a class no run of the world's is in (priority 21002), named
    # by a key no other case uses.
    ("spawn", "running", [
        ("run_id", "bigint", "%(r)s", False), ("epoch", "bigint", "%(e)s", False),
        ("key", "text", "%(u)s", False), ("kind", "text", "'k'", False),
        ("payload", "jsonb", "'{}'", False),
        ("priority", "integer", "21002", True),                  # NULL: the parent's
        ("max_attempts", "integer", "3", False),
        ("recovery_policy", "text", "'resume'", False),
        ("timeout", "interval", "interval '1 hour'", True),      # NULL: no deadline of its own
        ("budget", "jsonb", "'{\"cost_usd\": 2.00}'", True)]),  # NULL: no budget of its own
    ("wait_children", "running", [("run_id", "bigint", "%(r)s", False),
                                  ("epoch", "bigint", "%(e)s", False)]),
    ("children", "queued", [("run_id", "bigint", "%(q)s", False)]),
    ("begin_tool", "running", [("run_id", "bigint", "%(r)s", False), ("epoch", "bigint", "%(e)s", False),
                               ("call_id", "text", "%(u)s", False), ("tool", "text", "'search'", False),
                               ("idempotency", "text", "'read_only'", False),
                               ("args", "jsonb", "'{}'", False)]),
    ("end_tool", "call", [("run_id", "bigint", "%(r)s", False), ("epoch", "bigint", "%(e)s", False),
                          ("call_id", "text", "'c1'", False), ("outcome", "jsonb", "'{\"o\": 1}'", False)]),
    ("sweep", "", [("max_runs", "integer", "10", False)]),
    ("redrive", "failed", [("run_id", "bigint", "%(f)s", False),
                           ("reason", "text", "'again'", True)]),    # NULL: no reason given
    ("orphan_report", "", [("stale_after", "interval", "interval '1 minute'", True)]),  # NULL: settings
    ("dead_letter", "", [("max_runs", "integer", "10", False)]),
    # older_than '1 day': the world's runs are younger, so a valid call deletes none.
    ("purge", "", [("older_than", "interval", "interval '1 day'", False),
                   ("max_runs", "integer", "10", False), ("include_failed", "boolean", "true", False)]),
    # A limit no count reaches, on a tenant no run has: a valid call that limits nothing.
    ("set_limit", "", [("scope", "text", "'tenant'", False),
                       ("key", "text", "%(u)s", True),              # NULL: the default row
                       ("max_running", "integer", "2147483647", True)]),  # NULL: remove the row
    # A tenant no run has: pausing it holds back no run of the world's.
    ("pause", "", [("scope", "text", "'tenant'", False), ("key", "text", "%(u)s", False),
                   ("reason", "text", "'why'", True)]),             # NULL: no reason given
    ("resume", "", [("scope", "text", "'tenant'", False), ("key", "text", "%(u)s", False)]),
    ("set_budget", "running", [("run_id", "bigint", "%(r)s", False),
                               ("budget", "jsonb", "'{\"cost_usd\": 1}'", True)]),  # NULL: remove it
    ("usage_report", "", [("since", "timestamptz", "now() - interval '1 hour'", False),
                          ("until", "timestamptz", "now()", True)]),  # NULL: no upper end
    # A cron schedule whose next slot (03:17 UTC) is hours away from most test runs.
    ("create_schedule", "", [
        ("name", "text", "%(u)s", False),
        ("tenant_id", "text", "'bad-t'", False),
        ("kind", "text", "'k'", False),
        ("cron", "text", "'17 3 * * *'", False),     # NULL with every NULL: neither is given
        ("every", "interval", "NULL::interval", True),  # NULL: cron gives the slots
        ("payload", "jsonb", "'{}'", False),
        ("priority", "integer", "21000", False),
        ("timezone", "text", "'UTC'", False),
        ("max_attempts", "integer", "3", False),
        ("recovery_policy", "text", "'resume'", False),
        ("queue_ttl", "interval", "interval '1 hour'", True),  # NULL: its runs never expire
        ("timeout", "interval", "interval '1 hour'", True),    # NULL: no deadline
    ]),
    ("drop_schedule", "", [("name", "text", "%(u)s", False)]),  # no such schedule: false
    # A tenant no run has: a valid call that lists nothing.
    ("list_runs", "", [("status", "text", "'failed'", True),       # NULL: every status
                       ("tenant_id", "text", "%(u)s", True),       # NULL: every tenant
                       ("kind", "text", "'k'", True),              # NULL: every kind
                       ("before_run_id", "bigint", "1000", True),  # NULL: the newest
                       ("max_runs", "integer", "10", False)]),
    ("throughput", "", [("since", "timestamptz", "now() - interval '1 hour'", False)]),
    ("recovery_totals", "", []),
    ("tick", "", [("max_runs", "integer", "10", False)]),
]


def call(fn: str, signature: list[tuple[str, str, str, bool]], /, null: str | None = None,
         **override: str) -> str:
    values = ", ".join(
        f"{name} => " + ("NULL::" + typ if name == null else override.get(name, valid))
        for name, typ, valid, _ in signature)
    return f"SELECT * FROM runq.{fn}({values})"


def null_cases() -> list[Case]:
    cases = []
    for fn, needs, args in SIGNATURES:
        for name, _, _, null_ok in args:
            text = call(fn, args, null=name)
            if null_ok:
                cases.append(accepted(f"{fn}-{name}-NULL", text, needs))
            else:
                cases.append(rejected(f"{fn}-{name}-NULL", text, needs, name, "NULL"))
    return cases


def test_every_public_function_is_in_the_table(world_conn: psycopg.Connection) -> None:
    # A function added to the contract must be added to SIGNATURES.
    public = {r[0]: r[1] for r in world_conn.execute(
        """SELECT p.proname, array_to_string(p.proargnames[1:p.pronargs], ',')
             FROM pg_catalog.pg_proc AS p
            WHERE p.pronamespace = 'runq'::regnamespace AND p.proname !~ '^_'""")}
    assert public == {fn: ",".join(a[0] for a in args) for fn, _, args in SIGNATURES}


S = {fn: (needs, args) for fn, needs, args in SIGNATURES}


def v(fn: str, **override: str) -> tuple[str, str]:
    """A call of fn with valid arguments but the overridden ones, and its needs."""
    needs, args = S[fn]
    return call(fn, args, **override), needs


MISSING = ["-1", "0", "9223372036854775807"]
WITH_RUN_ID = [fn for fn, _, args in SIGNATURES if args and args[0][0] == "run_id"]


def missing_run_cases() -> list[Case]:
    # An unknown run is RQ003 in every function that takes one, worker
    # functions included: only a run that exists can fence.
    cases = []
    for fn in WITH_RUN_ID:
        _, args = S[fn]
        for missing in MISSING:
            text = call(fn, args, run_id=missing, epoch="1", call_id="'c1'", classes="ARRAY[0]")
            cases.append(rejected(f"{fn}-run-{missing}", text, "", f"run {missing} not found",
                                  state="RQ003"))
    return cases


# 100,000 classes from 30000 up, where no run waits, so the fresh run's class is
# the lowest that has one.
HUGE_CLASSES = "(SELECT array_agg(30000 + g %% 2768) FROM generate_series(1, 100000) AS g)"

VALUE_CASES: list[Case] = [
    # -- classes: empty, huge, NULL inside, outside 0..32767, not one-dimensional
    rejected("claim-classes-empty", *v("claim", classes="ARRAY[]::integer[]"), "classes", "{}"),
    rejected("claim-classes-null-element", *v("claim", classes="ARRAY[%(cls)s, NULL]"), "classes", "NULL"),
    rejected("claim-class-negative", *v("claim", classes="ARRAY[-1]"), "classes", "-1"),
    rejected("claim-class-32768", *v("claim", classes="ARRAY[32768]"), "classes", "32768"),
    rejected("claim-class-int-max", *v("claim", classes="ARRAY[2147483647]"), "classes", "2147483647"),
    # A two-dimensional array is not a list of classes.
    rejected("claim-classes-2d", *v("claim", classes="ARRAY[[%(cls)s, 0], [10, 20]]"), "classes"),
    # 100,000 valid classes (each one many times) are a valid, if odd, list:
    # the claim takes the fresh run of its class.
    accepted("claim-classes-huge", *v("claim", classes=f"array_append({HUGE_CLASSES}, %(cls)s)"),
             check="SELECT status = 'running' FROM runq.runs WHERE run_id = %(q)s"),
    # One bad class among 100,000 is named, and the message stays short.
    rejected("claim-classes-huge-one-bad",
             *v("claim", classes=f"array_append({HUGE_CLASSES}, 40000)"), "classes", "40000",
             max_message=1000),
    # A class nobody uses is not an error: nothing is ready there.
    accepted("claim-class-unused", *v("claim", classes="ARRAY[31999]"),
             check="SELECT status = 'queued' FROM runq.runs WHERE run_id = %(q)s"),
    # -- kinds: empty, NULL inside, not one-dimensional
    rejected("claim-kinds-empty", *v("claim", kinds="ARRAY[]::text[]"), "kinds", "{}"),
    rejected("claim-kinds-null-element", *v("claim", kinds="ARRAY['k', NULL]"), "kinds", "NULL"),
    rejected("claim-kinds-2d", *v("claim", kinds="ARRAY[['k'], ['j']]"), "kinds", "{{k},{j}}"),
    rejected("submit-priority-negative", *v("submit", priority="-1"), "priority", "-1"),
    rejected("submit-priority-32768", *v("submit", priority="32768"), "priority", "32768"),
    rejected("submit-priority-int-min", *v("submit", priority="-2147483648"), "priority", "-2147483648"),
    accepted("submit-priority-32767", *v("submit", priority="32767")),  # the top class is valid
    # -- counts
    rejected("claim-max-runs-0", *v("claim", max_runs="0"), "max_runs", "0"),
    rejected("claim-max-runs-negative", *v("claim", max_runs="-5"), "max_runs", "-5"),
    rejected("sweep-max-runs-0", *v("sweep", max_runs="0"), "max_runs", "0"),
    rejected("sweep-max-runs-negative", *v("sweep", max_runs="-1"), "max_runs", "-1"),
    rejected("dead-letter-max-runs-0", *v("dead_letter", max_runs="0"), "max_runs", "0"),
    rejected("purge-max-runs-0", *v("purge", max_runs="0"), "max_runs", "0"),
    rejected("list-runs-max-runs-0", *v("list_runs", max_runs="0"), "max_runs", "0"),
    rejected("read-output-max-chunks-0", *v("read_output", max_chunks="0"), "max_chunks", "0"),
    rejected("emit-chunks-empty", *v("emit", chunks="ARRAY[]::jsonb[]"), "chunks", "{}"),
    rejected("emit-chunks-null-element", *v("emit", chunks="ARRAY['1', NULL]::jsonb[]"),
             "chunks", "NULL"),
    rejected("watch-unknown-run", *v("watch", run_id="-7"), state="RQ003"),
    rejected("emit-unknown-run", *v("emit", run_id="-7"), state="RQ003"),
    rejected("list-runs-status-unknown", *v("list_runs", status="'done'"), "status", "done"),
    rejected("list-runs-status-upper-case", *v("list_runs", status="'FAILED'"), "status", "FAILED"),
    rejected("list-runs-tenant-empty", *v("list_runs", tenant_id="''"), "tenant_id", "''"),
    rejected("list-runs-kind-too-long", *v("list_runs", kind="repeat('k', 257)"), "kind", "kkkk"),
    rejected("throughput-since-infinity", *v("throughput", since="'infinity'"), "since", "infinity"),
    rejected("submit-max-attempts-0", *v("submit", max_attempts="0"), "max_attempts", "0"),
    rejected("submit-max-attempts-negative", *v("submit", max_attempts="-3"), "max_attempts", "-3"),
    accepted("claim-max-runs-int-max", *v("claim", max_runs="2147483647"),
             check="SELECT status = 'running' FROM runq.runs WHERE run_id = %(q)s"),
    accepted("submit-max-attempts-int-max", *v("submit", max_attempts="2147483647")),
    # -- policies and idempotency classes
    rejected("submit-policy-unknown", *v("submit", recovery_policy="'bogus'"), "recovery_policy", "bogus"),
    rejected("submit-policy-upper-case", *v("submit", recovery_policy="'RESUME'"), "recovery_policy", "RESUME"),
    rejected("submit-policy-trailing-space", *v("submit", recovery_policy="'resume '"),
             "recovery_policy", "'resume '"),
    rejected("submit-policy-empty", *v("submit", recovery_policy="''"), "recovery_policy", "''"),
    rejected("submit-policy-sql", *v("submit", recovery_policy="'resume''; DROP TABLE runq.runs; --'"),
             "recovery_policy", "DROP TABLE runq.runs"),
    rejected("submit-policy-unicode", *v("submit", recovery_policy="'résumé'"), "recovery_policy", "résumé"),
    rejected("submit-policy-huge", *v("submit", recovery_policy="repeat('x', 1000000)"),
             "recovery_policy", "xxxx", max_message=1000),
    rejected("begin-tool-idempotency-unknown", *v("begin_tool", idempotency="'bogus'"), "idempotency", "bogus"),
    rejected("begin-tool-idempotency-upper", *v("begin_tool", idempotency="'READ_ONLY'"),
             "idempotency", "READ_ONLY"),
    rejected("begin-tool-idempotency-sql", *v("begin_tool", idempotency="'read_only'' OR ''1''=''1'"),
             "idempotency", "OR"),
    rejected("begin-tool-idempotency-huge", *v("begin_tool", idempotency="repeat('y', 1000000)"),
             "idempotency", "yyyy", max_message=1000),
    # -- empty strings where a non-empty one is required
    rejected("submit-tenant-empty", *v("submit", tenant_id="''"), "tenant_id"),
    rejected("submit-kind-empty", *v("submit", kind="''"), "kind"),
    rejected("submit-session-empty", *v("submit", session_id="''"), "session_id"),
    rejected("submit-key-empty", *v("submit", idempotency_key="''"), "idempotency_key"),
    rejected("begin-tool-call-id-empty", *v("begin_tool", call_id="''"), "call_id"),
    rejected("begin-tool-tool-empty", *v("begin_tool", tool="''"), "tool"),
    rejected("end-tool-unknown-call", *v("end_tool", call_id="'never-begun'"), "never-begun"),
    # -- intervals: zero, negative, zero in disguise, and too large
    rejected("submit-queue-ttl-zero", *v("submit", queue_ttl="interval '0'"), "queue_ttl", "00:00:00"),
    rejected("submit-queue-ttl-negative", *v("submit", queue_ttl="interval '-1 second'"),
             "queue_ttl", "-00:00:01"),
    rejected("submit-queue-ttl-month-minus-30-days", *v("submit", queue_ttl="interval '1 month -30 days'"),
             "queue_ttl", "1 mon -30 days"),
    rejected("claim-lease-zero", *v("claim", lease="interval '0'"), "lease", "00:00:00"),
    rejected("claim-lease-negative", *v("claim", lease="interval '-5 minutes'"), "lease", "-00:05:00"),
    rejected("orphan-report-zero", *v("orphan_report", stale_after="interval '0'"), "stale_after", "00:00:00"),
    rejected("orphan-report-negative", *v("orphan_report", stale_after="interval '-1 day'"),
             "stale_after", "-1 days"),
    rejected("purge-older-than-negative", *v("purge", older_than="interval '-1 day'"),
             "older_than", "-1 days"),
    # A lease or queue_ttl past the end of the timestamp range cannot be
    # stored as a time: a bad argument, not an out-of-range error from inside.
    rejected("claim-lease-300000-years", *v("claim", lease="interval '300000 years'"),
             "lease", "300000 years"),
    rejected("submit-queue-ttl-300000-years", *v("submit", queue_ttl="interval '300000 years'"),
             "queue_ttl", "300000 years"),
    rejected("purge-older-than-300000-years", *v("purge", older_than="interval '300000 years'"),
             "older_than", "300000 years"),
    # A huge stale_after is a fair question ("nothing is stale then"): it is
    # answered, with every running run not stale.
    accepted("orphan-report-300000-years", *v("orphan_report", stale_after="interval '300000 years'"),
             check="SELECT bool_and(NOT o.stale) FROM runq.orphan_report(interval '300000 years') AS o"),
    # -- times: a run scheduled for 'infinity' could never run, yet would
    # hold its session's one active slot until cancelled: refused. '-infinity'
    # is a time in the past like any other: ready now.
    rejected("submit-scheduled-infinity", *v("submit", scheduled_for="'infinity'"), "scheduled_for", "infinity"),
    # -infinity would jump the run ahead of every run of its class, for ever:
    # a time, to be one, must be finite.
    rejected("submit-scheduled-minus-infinity", *v("submit", scheduled_for="'-infinity'"),
             "scheduled_for", "-infinity"),
    # -- wrong jsonb kinds
    *[rejected(f"submit-payload-{kind}", *v("submit", payload=f"'{doc}'"), "payload", kind)
      for kind, doc in [("array", "[]"), ("string", '"x"'), ("number", "1"), ("boolean", "true"),
                        ("null", "null")]],
    *[rejected(f"begin-tool-args-{kind}", *v("begin_tool", args=f"'{doc}'"), "args", kind)
      for kind, doc in [("array", "[1]"), ("string", '"x"'), ("null", "null")]],
    *[rejected(f"fail-failure-{name}", *v("fail", failure=f"'{doc}'"), "failure")
      for name, doc in [("array", '[{"code": "x"}]'), ("string", '"x"'), ("no-code", "{}"),
                        ("code-number", '{"code": 1}'), ("code-null", '{"code": null}'),
                        ("message-number", '{"code": "x", "message": 2}'),
                        ("json-null", "null")]],
    # question, state, input and outcome are any JSON value but SQL NULL
    # (docs/contract.md "Arguments"): other kinds, JSON null included, are kept.
    accepted("ask-user-question-string", *v("ask_user", question="'\"which one?\"'"),
             check="SELECT question = '\"which one?\"' FROM runq.runs WHERE run_id = %(r)s"),
    accepted("checkpoint-state-array", *v("checkpoint", state="'[1, [2], {\"3\": 4}]'"),
             check="SELECT k.state = '[1, [2], {\"3\": 4}]' FROM runq.checkpoints AS k WHERE k.run_id = %(r)s"),
    accepted("deliver-input-number", *v("deliver_input", input="'42'"),
             check="SELECT i.input = '42' FROM runq.inputs AS i WHERE i.run_id = %(w)s"),
    accepted("end-tool-outcome-json-null", *v("end_tool", outcome="'null'"),
             check="SELECT t.outcome = 'null' FROM runq.tool_calls AS t WHERE t.run_id = %(r)s"),
    accepted("complete-result-string", *v("complete", result="'\"done\"'"),
             check="SELECT result = '\"done\"' FROM runq.runs WHERE run_id = %(r)s"),
    # -- strings that look like SQL are data: stored as they are, nothing else happens
    accepted("submit-sql-strings", *v(
        "submit", tenant_id="'x''); DROP TABLE runq.runs; --'",
        kind="'k\"; DELETE FROM runq.settings; --'",
        session_id="%(u)s || ''' OR ''1''=''1'",
        idempotency_key="%(u)s || '''; TRUNCATE runq.runs CASCADE; --'",
        principal_id="'$$; DROP SCHEMA runq CASCADE; $$'",
        payload="'{\"sql\": \"1; DROP TABLE runq.runs\"}'"),
        check="""SELECT count(*) = 1 FROM runq.runs AS r
                  WHERE r.tenant_id = 'x''); DROP TABLE runq.runs; --'
                    AND r.kind = 'k"; DELETE FROM runq.settings; --'
                    AND r.session_id = %(u)s || ''' OR ''1''=''1'
                    AND r.principal_id = '$$; DROP SCHEMA runq CASCADE; $$'
                    AND (SELECT count(*) FROM runq.settings) = 1"""),
    accepted("tool-sql-strings", *v("begin_tool", call_id="%(u)s || '''); DELETE FROM runq.tool_calls; --'",
                                    tool="'t\\'''"),
             check="SELECT t.tool = 't\\''' FROM runq.tool_calls AS t WHERE t.run_id = %(r)s"),
    accepted("cancel-sql-reason", *v("cancel", reason="'r''; UPDATE runq.runs SET status = ''failed''; --'"),
             check="""SELECT (SELECT count(*) FROM runq.runs WHERE status = 'failed')
                           = (SELECT count(*) FROM runq.runs WHERE failure IS NOT NULL)
                        AND (SELECT status FROM runq.runs WHERE run_id = %(q)s) = 'cancelled'"""),
    accepted("claim-sql-worker", *v("claim", worker_id="'w''); DROP TABLE runq.run_events; --'"),
             check="""SELECT e.payload ->> 'worker_id' = 'w''); DROP TABLE runq.run_events; --'
                        FROM runq.run_events AS e WHERE e.run_id = %(q)s AND e.type = 'run.claimed'"""),
    # -- unicode: stored intact, and named intact in messages
    accepted("submit-unicode", *v(
        "submit", tenant_id="'租户-αβγ'", kind="'🤖.turn'",
        session_id="%(u)s || '-سشن-١-e\u0301-👩\u200d💻-\u202eevil'",
        payload="'{\"текст\": \"ünïcödé ✓\", \"emoji\": \"🧪\"}'"),
        check="""SELECT r.kind = '🤖.turn' AND r.payload ->> 'текст' = 'ünïcödé ✓'
                   AND r.session_id = %(u)s || '-سشن-١-e\u0301-👩\u200d💻-\u202eevil'
                   FROM runq.runs AS r WHERE r.tenant_id = '租户-αβγ'"""),
    rejected("begin-tool-idempotency-unicode", *v("begin_tool", idempotency="'ｒｅａｄ_ｏｎｌｙ'"),
             "idempotency", "ｒｅａｄ_ｏｎｌｙ"),
    # -- limits: a scope of tenant or kind, at least one running run
    rejected("set-limit-scope-unknown", *v("set_limit", scope="'bogus'"), "scope", "bogus"),
    rejected("set-limit-scope-class", *v("set_limit", scope="'class'"), "scope", "class"),
    rejected("set-limit-scope-upper", *v("set_limit", scope="'TENANT'"), "scope", "TENANT"),
    rejected("set-limit-scope-huge", *v("set_limit", scope="repeat('z', 1000000)"), "scope", "zzzz",
             max_message=1000),
    rejected("set-limit-max-running-0", *v("set_limit", max_running="0"), "max_running", "0"),
    rejected("set-limit-max-running-negative", *v("set_limit", max_running="-1"), "max_running", "-1"),
    rejected("set-limit-max-running-int-min", *v("set_limit", max_running="-2147483648"),
             "max_running", "-2147483648"),
    accepted("set-limit-kind", *v("set_limit", scope="'kind'", max_running="1"),
             check="SELECT (l.max_running, l.running) = (1, 0) FROM runq.limits AS l"
                   " WHERE l.scope = 'kind' AND l.key = %(u)s"),
    accepted("set-limit-sql-key", *v("set_limit", key="%(u)s || '''); DELETE FROM runq.runs; --'"),
             check="SELECT count(*) = 1 FROM runq.limits AS l"
                   " WHERE l.key = %(u)s || '''); DELETE FROM runq.runs; --'"),
    # -- pauses: a scope of class, kind, tenant or schedule; a class is 0..32767 as text
    rejected("pause-scope-unknown", *v("pause", scope="'bogus'"), "scope", "bogus"),
    rejected("pause-scope-upper", *v("pause", scope="'CLASS'", key="'10'"), "scope", "CLASS"),
    rejected("pause-class-not-a-number", *v("pause", scope="'class'", key="'abc'"), "abc"),
    rejected("pause-class-negative", *v("pause", scope="'class'", key="'-1'"), "-1"),
    rejected("pause-class-32768", *v("pause", scope="'class'", key="'32768'"), "32768"),
    rejected("pause-class-decimal", *v("pause", scope="'class'", key="'1.5'"), "1.5"),
    rejected("pause-class-huge", *v("pause", scope="'class'", key="repeat('9', 1000000)"), "9999",
             max_message=1000),
    rejected("resume-scope-unknown", *v("resume", scope="'bogus'"), "scope", "bogus"),
    rejected("resume-class-not-a-number", *v("resume", scope="'class'", key="'abc'"), "abc"),
    # A class no run is in (the world's classes start at 20000): paused, holding nothing back.
    accepted("pause-class-unused", *v("pause", scope="'class'", key="'31998'"),
             check="SELECT count(*) = 1 FROM runq.pauses AS p WHERE (p.scope, p.key) = ('class', '31998')"),
    accepted("pause-schedule", *v("pause", scope="'schedule'"),
             check="SELECT count(*) = 1 FROM runq.pauses AS p WHERE (p.scope, p.key) = ('schedule', %(u)s)"),
    accepted("pause-sql-reason", *v("pause", reason="'r''; DELETE FROM runq.runs; --'"),
             check="SELECT p.reason = 'r''; DELETE FROM runq.runs; --' FROM runq.pauses AS p"
                   " WHERE p.key = %(u)s"),
    # -- usage: a non-empty object of non-negative numbers (keys are free)
    *[rejected(f"record-usage-{name}", *v("record_usage", usage=f"'{doc}'"), "usage")
      for name, doc in [("empty", "{}"), ("array", "[1]"), ("number", "1"), ("string", '"x"'),
                        ("json-null", "null"), ("negative", '{"cost_usd": -0.01}'),
                        ("negative-zero-and-one", '{"a": 0, "b": -1}'),
                        ("amount-string", '{"cost_usd": "0.01"}'), ("amount-null", '{"cost_usd": null}'),
                        ("amount-boolean", '{"cost_usd": true}'), ("amount-object", '{"cost_usd": {"x": 1}}'),
                        # an array of numbers is no amount (a lax jsonpath would unwrap it)
                        ("amount-array", '{"cost_usd": [1]}'), ("amount-empty-array", '{"cost_usd": []}')]],
    # 100,000 good amounts and one negative: refused, in a short message.
    rejected("record-usage-huge-one-negative", *v(
        "record_usage", usage="(SELECT jsonb_object_agg('k' || g, g) FROM generate_series(1, 100000) AS g)"
                              " || '{\"bad\": -1}'"), "usage", max_message=1000),
    # The order of checks: the usage first, then the epoch, then the run, then the epoch's range.
    rejected("record-usage-bad-usage-unknown-run", "SELECT runq.record_usage(-1, 1, '{}')", "", "usage"),
    rejected("record-usage-null-epoch-unknown-run", "SELECT runq.record_usage(-1, NULL, '{\"a\": 1}')",
             "", "epoch", "NULL"),
    rejected("record-usage-epoch-0-unknown-run", "SELECT runq.record_usage(-1, 0, '{\"a\": 1}')", "",
             "run -1 not found", state="RQ003"),
    # Epochs the run never had: 0, negative, above its current one; a queued run never claimed has none.
    rejected("record-usage-epoch-0", *v("record_usage", epoch="0"), "epoch", "0"),
    rejected("record-usage-epoch-negative", *v("record_usage", epoch="-1"), "epoch", "-1"),
    rejected("record-usage-epoch-above", *v("record_usage", epoch="%(e)s + 1"), "epoch", "2"),
    rejected("record-usage-epoch-int-max", *v("record_usage", epoch="9223372036854775807"),
             "epoch", "9223372036854775807"),
    rejected("record-usage-never-claimed", "SELECT runq.record_usage(%(q)s, 1, '{\"a\": 1}')", "queued",
             "epoch", "1"),
    # Valid: zero amounts, amounts beyond a float, and any keys, stored exactly.
    accepted("record-usage-exact", *v("record_usage", usage="'{\"cost_usd\": 0.000000000000000000001, "
                                                          "\"tokens\": 100000000000000000000000000001, "
                                                          "\"zero\": 0}'"),
             check="SELECT r.usage = '{\"cost_usd\": 0.000000000000000000001, "
                   "\"tokens\": 100000000000000000000000000001, \"zero\": 0}'"
                   " FROM runq.run_usage AS r WHERE r.run_id = %(r)s"),
    accepted("record-usage-sql-and-unicode-keys", *v(
        "record_usage", usage="'{\"x''); DELETE FROM runq.runs; --\": 1, \"💸\": 2.5}'"),
             check="SELECT (r.usage ->> 'x''); DELETE FROM runq.runs; --')::numeric = 1"
                   " AND (r.usage ->> '💸')::numeric = 2.5 FROM runq.run_usage AS r WHERE r.run_id = %(r)s"),
    # Spend is a fact: usage of a finished run, or of one waiting for its user, is recorded.
    accepted("record-usage-failed-run", "SELECT runq.record_usage(%(f)s, %(e)s, '{\"cost_usd\": 0.25}')",
             "failed", check="SELECT r.usage = '{\"cost_usd\": 0.25}' FROM runq.run_usage AS r"
                             " WHERE r.run_id = %(f)s"),
    accepted("record-usage-waiting-run", "SELECT runq.record_usage(%(w)s, %(e)s, '{\"cost_usd\": 0.25}')",
             "waiting", check="SELECT r.usage = '{\"cost_usd\": 0.25}' FROM runq.run_usage AS r"
                              " WHERE r.run_id = %(w)s"),
    # -- budgets: NULL or a non-empty object of non-negative numbers, in submit and set_budget
    *[rejected(f"{fn.replace('_', '-')}-budget-{name}", *v(fn, budget=f"'{doc}'"), "budget")
      for fn in ("submit", "set_budget")
      for name, doc in [("empty", "{}"), ("array", '[{"cost_usd": 1}]'), ("number", "2"),
                        ("json-null", "null"), ("negative", '{"cost_usd": -2}'),
                        ("amount-string", '{"cost_usd": "2.00"}'), ("amount-null", '{"cost_usd": null}'),
                        ("amount-object", '{"cost_usd": {"max": 2}}'),
                        ("amount-array", '{"cost_usd": [2]}'), ("amount-empty-array", '{"cost_usd": []}')]],
    # A budget of 0 is valid (it stops the first turn); the limits are kept exactly.
    accepted("submit-budget-zero-and-exact", *v("submit", budget="'{\"cost_usd\": 0, "
                                                               "\"credits\": 2.000000000000000000001}'"),
             check="SELECT r.budget = '{\"cost_usd\": 0, \"credits\": 2.000000000000000000001}'"
                   " FROM runq.runs AS r WHERE r.session_id = %(u)s"),
    accepted("set-budget-failed-run", "SELECT runq.set_budget(%(f)s, '{\"cost_usd\": 3}')", "failed",
             check="SELECT r.budget = '{\"cost_usd\": 3}' FROM runq.runs AS r WHERE r.run_id = %(f)s"),
    accepted("set-budget-null-removes", *v("set_budget", budget="NULL"),
             check="SELECT r.budget IS NULL FROM runq.runs AS r WHERE r.run_id = %(r)s"),
    # -- timeouts: positive and under 1000 years; the deadline is created_at + timeout
    rejected("submit-timeout-zero", *v("submit", timeout="interval '0'"), "timeout", "00:00:00"),
    rejected("submit-timeout-negative", *v("submit", timeout="interval '-1 second'"), "timeout", "-00:00:01"),
    rejected("submit-timeout-month-minus-30-days", *v("submit", timeout="interval '1 month -30 days'"),
             "timeout", "1 mon -30 days"),
    rejected("submit-timeout-1000-years", *v("submit", timeout="interval '1000 years'"),
             "timeout", "1000 years"),
    rejected("submit-timeout-300000-years", *v("submit", timeout="interval '300000 years'"),
             "timeout", "300000 years"),
    accepted("submit-timeout-999-years", *v("submit", timeout="interval '999 years'"),
             check="SELECT r.deadline = r.created_at + interval '999 years' AND r.timeout = interval '999 years'"
                   " FROM runq.runs AS r WHERE r.session_id = %(u)s"),
    accepted("submit-timeout-microsecond", *v("submit", timeout="interval '1 microsecond'"),
             check="SELECT r.deadline = r.created_at + interval '1 microsecond'"
                   " FROM runq.runs AS r WHERE r.session_id = %(u)s"),
    # -- the usage report: since before until
    rejected("usage-report-until-equals-since", "SELECT * FROM runq.usage_report(now(), now())", "", "until"),
    rejected("usage-report-until-before-since",
             "SELECT * FROM runq.usage_report(now(), now() - interval '1 second')", "", "until"),
    # -- schedules: exactly one of cron and every, a cron that parses, an every
    # that grows, a time zone that exists; then as submit checks a run's
    rejected("create-schedule-cron-and-every", *v("create_schedule", every="interval '1 hour'"),
             "cron", "every", "'17 3 * * *'", "01:00:00"),
    rejected("create-schedule-cron-four-fields", *v("create_schedule", cron="'17 3 * *'"),
             "cron", "17 3 * *"),
    rejected("create-schedule-cron-minute-60", *v("create_schedule", cron="'60 * * * *'"), "cron", "60"),
    rejected("create-schedule-cron-step-0", *v("create_schedule", cron="'*/0 * * * *'"), "cron", "*/0"),
    rejected("create-schedule-cron-never", *v("create_schedule", cron="'0 0 30 2 *'"), "cron", "0 0 30 2 *"),
    rejected("create-schedule-cron-empty", *v("create_schedule", cron="''"), "cron"),
    rejected("create-schedule-cron-sql", *v("create_schedule", cron="'* * * * *; DROP TABLE runq.runs'"),
             "cron", "DROP TABLE"),
    rejected("create-schedule-cron-huge", *v("create_schedule", cron="repeat('x', 1000000)"),
             "cron", "xxxx", max_message=1000),
    # A 100,000-character minute list is odd but valid: stored as it is. (Each
    # element is parsed in turn, about 50 us each: a million characters took 24 s.)
    accepted("create-schedule-cron-huge-list",
             *v("create_schedule", cron="repeat('1,', 50000) || '2 * * * *'"),
             check="SELECT length(s.cron) = 100009 FROM runq.schedule_settings AS s WHERE s.name = %(u)s"),
    rejected("create-schedule-every-zero",
             *v("create_schedule", cron="NULL::text", every="interval '0'"), "every", "00:00:00"),
    rejected("create-schedule-every-negative",
             *v("create_schedule", cron="NULL::text", every="interval '-1 hour'"), "every", "-01:00:00"),
    rejected("create-schedule-every-negative-part",
             *v("create_schedule", cron="NULL::text", every="interval '1 month -10 days'"),
             "every", "1 mon -10 days"),
    rejected("create-schedule-every-1000-years",
             *v("create_schedule", cron="NULL::text", every="interval '1000 years'"), "every", "1000 years"),
    accepted("create-schedule-every-minute",
             *v("create_schedule", cron="NULL::text", every="interval '1 minute'"),
             check="SELECT s.every = interval '1 minute' AND s.cron IS NULL"
                   " FROM runq.schedule_settings AS s WHERE s.name = %(u)s"),
    rejected("create-schedule-timezone-unknown", *v("create_schedule", timezone="'Mars/Olympus_Mons'"),
             "timezone", "Mars/Olympus_Mons"),
    rejected("create-schedule-timezone-empty", *v("create_schedule", timezone="''"), "timezone", "''"),
    rejected("create-schedule-timezone-posixrules", *v("create_schedule", timezone="'posixrules'"),
             "timezone", "posixrules"),
    rejected("create-schedule-timezone-sql", *v("create_schedule", timezone="'UTC''; DROP TABLE runq.runs; --'"),
             "timezone", "DROP TABLE"),
    accepted("create-schedule-timezone-paris", *v("create_schedule", timezone="'Europe/Paris'"),
             check="SELECT s.timezone = 'Europe/Paris' FROM runq.schedule_settings AS s WHERE s.name = %(u)s"),
    rejected("create-schedule-name-empty", *v("create_schedule", name="''"), "name"),
    rejected("create-schedule-priority-32768", *v("create_schedule", priority="32768"), "priority", "32768"),
    rejected("create-schedule-max-attempts-0", *v("create_schedule", max_attempts="0"), "max_attempts", "0"),
    rejected("create-schedule-policy-unknown", *v("create_schedule", recovery_policy="'bogus'"),
             "recovery_policy", "bogus"),
    rejected("create-schedule-payload-array", *v("create_schedule", payload="'[]'"), "payload", "array"),
    rejected("create-schedule-queue-ttl-zero", *v("create_schedule", queue_ttl="interval '0'"),
             "queue_ttl", "00:00:00"),
    rejected("create-schedule-timeout-negative", *v("create_schedule", timeout="interval '-1 second'"),
             "timeout", "-00:00:01"),
    # A bad replacement changes nothing of the schedule it would replace.
    rejected("create-schedule-replace-bad-cron",
             "SELECT runq.create_schedule(%(s)s, 't', 'k', cron => '0 25 * * *')", "schedule",
             "cron", "0 25 * * *"),
    rejected("create-schedule-replace-cron-and-every",
             "SELECT runq.create_schedule(%(s)s, 't', 'k', cron => '0 4 * * *', every => interval '1 day')",
             "schedule", "cron", "every"),
    rejected("drop-schedule-name-empty", *v("drop_schedule", name="''"), "name"),
    accepted("drop-schedule-unknown", *v("drop_schedule", name="%(u)s || '-never-created'"),
             check="SELECT NOT runq.drop_schedule(%(u)s || '-never-created')"),
    rejected("tick-max-runs-0", *v("tick", max_runs="0"), "max_runs", "0"),
    rejected("tick-max-runs-negative", *v("tick", max_runs="-1"), "max_runs", "-1"),
    # -- child runs: spawn checks its arguments as submit does, and before
    # fencing (a run never claimed, or an epoch past, still gets 22023)
    rejected("spawn-key-empty", *v("spawn", key="''"), "key"),
    rejected("spawn-key-257", *v("spawn", key="repeat('k', 257)"), "key"),
    accepted("spawn-key-256", *v("spawn", key="repeat('k', 256)"),
             check="SELECT count(*) = 1 FROM runq.runs WHERE parent_run_id = %(r)s"),
    rejected("spawn-kind-empty", *v("spawn", kind="''"), "kind"),
    *[rejected(f"spawn-payload-{kind}", *v("spawn", payload=f"'{doc}'"), "payload", kind)
      for kind, doc in [("array", "[]"), ("string", '"x"'), ("null", "null")]],
    rejected("spawn-priority-negative", *v("spawn", priority="-1"), "priority", "-1"),
    rejected("spawn-priority-32768", *v("spawn", priority="32768"), "priority", "32768"),
    rejected("spawn-max-attempts-0", *v("spawn", max_attempts="0"), "max_attempts", "0"),
    rejected("spawn-policy-unknown", *v("spawn", recovery_policy="'bogus'"),
             "recovery_policy", "bogus"),
    rejected("spawn-timeout-zero", *v("spawn", timeout="interval '0'"), "timeout", "00:00:00"),
    rejected("spawn-timeout-negative", *v("spawn", timeout="interval '-1 second'"),
             "timeout", "-00:00:01"),
    *[rejected(f"spawn-budget-{name}", *v("spawn", budget=f"'{doc}'"), "budget")
      for name, doc in [("empty", "{}"), ("negative", '{"cost_usd": -2}'),
                        ("amount-string", '{"cost_usd": "2.00"}')]],
    rejected("spawn-key-empty-never-claimed", "SELECT runq.spawn(%(q)s, 1, '', 'k')", "queued",
             "key"),
    rejected("spawn-payload-array-stale-epoch",
             "SELECT runq.spawn(%(r)s, %(e)s - 1, %(u)s, 'k', '[]')", "running", "payload"),
    # A valid spawn: a queued child of the parent's tenant in the parent's class.
    accepted("spawn-child", *v("spawn", priority="NULL::integer"),
             check="""SELECT (c.status, c.tenant_id, c.priority, c.parent_run_id, c.kind)
                           = ('queued', p.tenant_id, p.priority, p.run_id, 'k')
                        FROM runq.runs AS c JOIN runq.runs AS p ON p.run_id = c.parent_run_id
                       WHERE p.run_id = %(r)s"""),
]


ALL_CASES = null_cases() + missing_run_cases() + VALUE_CASES


def test_case_ids_are_unique() -> None:
    ids = [c.id for c in ALL_CASES]
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)


@pytest.mark.parametrize("case", ALL_CASES, ids=[c.id for c in ALL_CASES])
def test_bad_input(case: Case, world: World, world_conn: psycopg.Connection) -> None:
    conn = world_conn
    params = {**world.make(case.needs), **case.params}
    before = snapshot(conn)
    if case.sqlstate is None:
        conn.execute(case.sql, params).fetchall()
        if case.check:
            assert conn.execute(case.check, params).fetchone() == (True,), case.check
        return
    with pytest.raises(psycopg.Error) as raised:
        conn.execute(case.sql, params)
    error = raised.value
    message = error.diag.message_primary or ""
    shown = message if len(message) < 300 else f"{message[:300]}... ({len(message)} characters)"
    assert error.sqlstate == case.sqlstate, f"{case.sql}\n-> {error.sqlstate}: {shown}"
    for name in case.names:
        assert name in message, f"{name!r} not in the message: {shown}"
    if case.max_message is not None:
        assert len(message) <= case.max_message, f"a {len(message)}-character message: {shown}"
    assert snapshot(conn) == before, "a rejected call changed runq's tables"


# -- huge identifiers ---------------------------------------------------------------

BIG = "".join(random.Random(6).choices(string.ascii_letters + string.digits, k=10_000))
IDENTIFIERS = [
    # (parameter, the run it needs, call): a 10,000-character random value,
    # more than any btree index row can hold
    ("tenant_id", "", "SELECT * FROM runq.submit(%(big)s, 'k', session_id => %(u)s, priority => 21001)"),
    ("session_id", "", "SELECT * FROM runq.submit('t', 'k', session_id => %(big)s, priority => 21001)"),
    ("idempotency_key", "", "SELECT * FROM runq.submit('t', 'k', idempotency_key => %(big)s)"),
    ("principal_id", "",
     "SELECT * FROM runq.submit('t', 'k', idempotency_key => %(u)s, principal_id => %(big)s)"),
    ("kind", "", "SELECT * FROM runq.submit('t', %(big)s)"),
    ("call_id", "running", "SELECT runq.begin_tool(%(r)s, %(e)s, %(big)s, 'search', 'read_only')"),
    ("tool", "running", "SELECT runq.begin_tool(%(r)s, %(e)s, %(u)s, %(big)s, 'read_only')"),
    ("worker_id", "queued", "SELECT run_id FROM runq.claim(ARRAY[%(cls)s], worker_id => %(big)s)"),
    ("reason", "queued", "SELECT runq.cancel(%(q)s, %(big)s)"),
]


@pytest.mark.parametrize("parameter, needs, text", IDENTIFIERS, ids=[p for p, _, _ in IDENTIFIERS])
def test_huge_identifier_is_stored_or_refused_by_name(parameter: str, needs: str, text: str,
                                                      world: World,
                                                      world_conn: psycopg.Connection) -> None:
    # The contract sets no length limit, so a huge identifier is either taken
    # and stored intact, or refused as a bad argument that names it. What it
    # must not be is an internal error about an index row (54000).
    params = {**world.make(needs), "big": BIG}
    before = snapshot(world_conn)
    try:
        world_conn.execute(text, params).fetchall()
    except psycopg.Error as error:
        message = error.diag.message_primary or ""
        assert (error.sqlstate, parameter in message) == ("22023", True), \
            f"{parameter}: {error.sqlstate}: {message[:200]}"
        assert snapshot(world_conn) == before
        return
    stored = world_conn.execute(
        """SELECT count(*) FROM runq.runs AS r WHERE %(big)s IN (r.tenant_id, r.session_id, r.kind,
                  r.principal_id, r.lease_owner)
           UNION ALL SELECT count(*) FROM runq.idempotency_keys AS k WHERE k.idempotency_key = %(big)s
           UNION ALL SELECT count(*) FROM runq.tool_calls AS t WHERE %(big)s IN (t.call_id, t.tool)
           UNION ALL SELECT count(*) FROM runq.run_events AS e WHERE e.payload ->> 'reason' = %(big)s""",
        params).fetchall()
    assert sum(n for (n,) in stored) >= 1, f"{parameter} was accepted but not stored intact"


# -- 10 MB jsonb ---------------------------------------------------------------------

TEN_MB = 10 * 1024 * 1024


def big_object(kind: str = "object") -> str:
    """JSON text of a little over 10 MB: many keys of mixed values."""
    item = {"text": "lorem ipsum dolor sit amet " * 20, "n": 12345.678, "ok": True, "none": None,
            "list": list(range(20))}
    doc = {f"k{i:06d}": item for i in range(TEN_MB // len(json.dumps(item)) + 1)}
    text = json.dumps(doc if kind == "object" else list(doc.values()))
    assert len(text) > TEN_MB
    return text


def test_ten_megabyte_objects_are_accepted_and_kept_intact(conn: psycopg.Connection) -> None:
    # A 10 MB object is a valid payload, state, question, input, args,
    # outcome, result and failure: nothing in the contract bounds their size
    # (jsonb's own limit is 255 MB). Each is stored and handed back intact.
    doc = big_object()
    big = {"doc": doc}
    same = "md5(%s::text) = md5(%%(doc)s::jsonb::text)"

    run_id = conn.execute("SELECT run_id FROM runq.submit('big', 'k', payload => %(doc)s::jsonb, "
                          "priority => 22000, idempotency_key => 'big-1', session_id => 'big-s')",
                          big).fetchone()[0]
    # The idempotency hash covers the 10 MB: the same request is a duplicate.
    assert conn.execute("SELECT run_id, outcome FROM runq.submit('big', 'k', payload => %(doc)s::jsonb, "
                        "priority => 22000, idempotency_key => 'big-1', session_id => 'big-s')",
                        big).fetchone() == (run_id, "duplicate")
    claimed = conn.execute(f"SELECT run_id, epoch, {same % 'payload'} FROM runq.claim(ARRAY[22000])",
                           big).fetchone()
    assert claimed == (run_id, 1, True)
    assert conn.execute("SELECT runq.checkpoint(%(r)s, 1, %(doc)s::jsonb), "
                        "runq.begin_tool(%(r)s, 1, 'c1', 'search', 'read_only', %(doc)s::jsonb)",
                        {**big, "r": run_id}).fetchone() == (True, True)
    assert conn.execute("SELECT runq.end_tool(%(r)s, 1, 'c1', %(doc)s::jsonb), "
                        "runq.ask_user(%(r)s, 1, %(doc)s::jsonb)", {**big, "r": run_id}).fetchone() \
        == (True, True)
    assert conn.execute("SELECT outcome FROM runq.submit('big', 'k', payload => %(doc)s::jsonb, "
                        "session_id => 'big-s', priority => 22000)", big).fetchone() == ("input_delivered",)
    resumed = conn.execute(f"SELECT epoch, {same % 'checkpoint'}, md5((inputs -> 0)::text) "
                           "= md5(%(doc)s::jsonb::text) FROM runq.claim(ARRAY[22000])", big).fetchone()
    assert resumed == (2, True, True)
    assert conn.execute("SELECT runq.complete(%(r)s, 2, %(doc)s::jsonb)", {**big, "r": run_id}).fetchone() \
        == (True,)
    row = conn.execute(f"""SELECT r.status, {same % 'r.payload'}, {same % 'r.result'},
                                  (SELECT {same % 't.args'} AND {same % 't.outcome'}
                                     FROM runq.tool_calls AS t WHERE t.run_id = r.run_id)
                             FROM runq.runs AS r WHERE r.run_id = %(r)s""", {**big, "r": run_id}).fetchone()
    assert row == ("succeeded", True, True, True)
    # The question was kept while the run waited: in its event.
    assert conn.execute(f"""SELECT {same % "(e.payload -> 'question')"} FROM runq.run_events AS e
                             WHERE e.run_id = %(r)s AND e.type = 'run.waiting_for_user'""",
                        {**big, "r": run_id}).fetchone() == (True,)
    # And a failure with a 10 MB detail.
    failing = conn.execute("SELECT run_id FROM runq.submit('big', 'k', priority => 22001)").fetchone()[0]
    conn.execute("SELECT * FROM runq.claim(ARRAY[22001])")
    assert conn.execute("SELECT runq.fail(%(r)s, 1, jsonb_build_object('code', 'huge', 'detail', "
                        "%(doc)s::jsonb))", {**big, "r": failing}).fetchone() == (True,)
    detail = same % "(failure -> 'detail')"
    assert conn.execute(f"SELECT {detail} FROM runq.runs WHERE run_id = %(r)s",
                        {**big, "r": failing}).fetchone() == (True,)


@pytest.mark.parametrize("call", [
    "SELECT * FROM runq.submit('big', 'k', payload => %(doc)s::jsonb)",
    "SELECT runq.begin_tool(%(r)s, %(e)s, 'c9', 'search', 'read_only', %(doc)s::jsonb)",
    "SELECT runq.fail(%(r)s, %(e)s, %(doc)s::jsonb)",
], ids=["payload", "args", "failure"])
def test_ten_megabyte_array_is_refused_in_a_short_message(call: str, conn: psycopg.Connection) -> None:
    world = World(conn)
    params = {**world.running(), "doc": big_object("array")}
    before = snapshot(conn)
    with pytest.raises(psycopg.Error) as raised:
        conn.execute(call, params)
    message = raised.value.diag.message_primary or ""
    assert raised.value.sqlstate == "22023", message[:300]
    # The message names the kind, or shows the start of the value.
    assert ("array" in message or "got [" in message) and len(message) < 1000, message[:300]
    assert snapshot(conn) == before


# -- deep nesting -------------------------------------------------------------------

def nested(depth: int, kind: str = "object") -> str:
    return ('{"a":' * depth + "{}" + "}" * depth) if kind == "object" \
        else ("[" * depth + "]" * depth)


DEEP_CALLS = {
    "payload": "SELECT * FROM runq.submit('deep', 'k', payload => %(doc)s::jsonb, idempotency_key => %(u)s)",
    "state": "SELECT runq.checkpoint(%(r)s, %(e)s, %(doc)s::jsonb)",
    "question": "SELECT runq.ask_user(%(r)s, %(e)s, %(doc)s::jsonb)",
    "args": "SELECT runq.begin_tool(%(r)s, %(e)s, %(u)s, 'search', 'read_only', %(doc)s::jsonb)",
    "result": "SELECT runq.complete(%(r)s, %(e)s, %(doc)s::jsonb)",
    "failure": "SELECT runq.fail(%(r)s, %(e)s, %(doc)s::jsonb || '{\"code\": \"deep\"}')",
}


@pytest.mark.parametrize("argument", list(DEEP_CALLS))
def test_deep_but_parseable_jsonb_is_kept_intact(argument: str, conn: psycopg.Connection) -> None:
    # 5,000 levels parse on a stock server (the parser's limit is the stack:
    # about 13,000 levels with max_stack_depth 2 MB). Valid, so stored intact,
    # hash and events included (submit with a key hashes it).
    world = World(conn)
    params = {**world.make("running"), "doc": nested(5000)}
    conn.execute(DEEP_CALLS[argument], params).fetchall()
    found = conn.execute(
        """SELECT count(*) FROM (
               SELECT r.payload AS j FROM runq.runs AS r UNION ALL SELECT r.question FROM runq.runs AS r
               UNION ALL SELECT r.result FROM runq.runs AS r UNION ALL SELECT r.failure - 'code' - 'message'
                   - 'attempt' - 'epoch' - 'at' FROM runq.runs AS r
               UNION ALL SELECT k.state FROM runq.checkpoints AS k UNION ALL SELECT t.args FROM runq.tool_calls AS t
           ) AS x WHERE md5(x.j::text) = md5(%(doc)s::jsonb::text)""", params).fetchone()[0]
    assert found == 1


@pytest.mark.parametrize("argument", list(DEEP_CALLS))
def test_too_deep_jsonb_is_refused_by_the_parser_before_runq(argument: str, conn: psycopg.Connection) -> None:
    # 100,000 levels: PostgreSQL's jsonb input refuses it with 54001
    # (statement_too_complex, "stack depth limit exceeded") while binding the
    # argument, before any runq code runs. That is the right answer and the
    # only possible one: runq cannot see a value the server will not parse,
    # and "program limit exceeded" (class 54) is the class for it, not 22023.
    # It changes nothing.
    world = World(conn)
    params = {**world.make("running"), "doc": nested(100_000)}
    before = snapshot(conn)
    with pytest.raises(psycopg.Error) as raised:
        conn.execute(DEEP_CALLS[argument], params)
    assert raised.value.sqlstate == "54001", raised.value.diag.message_primary
    assert "runq." not in (raised.value.diag.context or "")  # no runq function was running
    assert snapshot(conn) == before


def test_deep_array_payload_is_a_wrong_kind(conn: psycopg.Connection) -> None:
    before = snapshot(conn)
    with pytest.raises(psycopg.Error) as raised:
        conn.execute("SELECT * FROM runq.submit('deep', 'k', payload => %s::jsonb)", [nested(5000, "array")])
    assert (raised.value.sqlstate, raised.value.diag.message_primary) == \
        ("22023", "payload must be a jsonb object, got array")
    assert snapshot(conn) == before


# -- what the server refuses before runq sees it --------------------------------------

def test_nul_in_jsonb_is_refused_by_the_server(conn: psycopg.Connection) -> None:
    # jsonb cannot hold \u0000 (22P05, untranslatable_character), raised while
    # parsing the argument; text cannot hold NUL at all, and psycopg refuses to
    # send it. Either way nothing reaches runq and nothing changes.
    before = snapshot(conn)
    with pytest.raises(psycopg.Error) as raised:
        conn.execute("SELECT * FROM runq.submit('nul', 'k', payload => %s::jsonb)", ['{"a": "\\u0000"}'])
    assert raised.value.sqlstate == "22P05"
    with pytest.raises(psycopg.DataError):
        conn.execute("SELECT * FROM runq.submit(%s, 'k')", ["te\x00nant"])
    assert snapshot(conn) == before


def test_lone_surrogate_in_jsonb_is_refused_by_the_server(conn: psycopg.Connection) -> None:
    before = snapshot(conn)
    with pytest.raises(psycopg.Error) as raised:
        conn.execute("SELECT * FROM runq.submit('sur', 'k', payload => %s::jsonb)", ['{"a": "\\ud800"}'])
    assert raised.value.sqlstate in ("22P02", "22P05"), raised.value.sqlstate
    assert snapshot(conn) == before


# -- properties ----------------------------------------------------------------------

TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
               max_size=200)
JSON_SCALARS = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | TEXT | \
    st.floats(allow_nan=False, allow_infinity=False)
JSON = st.recursive(JSON_SCALARS, lambda inner: st.lists(inner, max_size=5)
                    | st.dictionaries(TEXT, inner, max_size=5), max_leaves=30)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tenant=TEXT, kind=TEXT, session=TEXT, payload=st.dictionaries(TEXT, JSON, max_size=6))
def test_any_strings_and_object_are_stored_exactly(conn: psycopg.Connection, tenant: str, kind: str,
                                                   session: str, payload: dict[str, Any]) -> None:
    # Any text without NUL is a tenant, kind or session; an empty tenant or
    # kind is 22023, as is an empty session_id (NULL means "none").
    doc = json.dumps(payload)
    before = snapshot(conn)
    try:
        row = conn.execute(
            "SELECT run_id FROM runq.submit(%(t)s, %(k)s, %(p)s::jsonb, session_id => %(s)s,"
            " priority => 23000)",
            {"t": tenant, "k": kind, "s": session, "p": doc}).fetchone()
    except psycopg.Error as error:
        assert (error.sqlstate, "" in (tenant, kind, session)) == ("22023", True), str(error)
        assert snapshot(conn) == before
        return
    assert "" not in (tenant, kind, session)
    stored = conn.execute("SELECT tenant_id, kind, session_id, payload = %s::jsonb FROM runq.runs "
                          "WHERE run_id = %s", [doc, row[0]]).fetchone()
    assert stored == (tenant, kind, session, True)
    conn.execute("SELECT runq.cancel(%s)", [row[0]])  # frees the session for the next example


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=JSON.filter(lambda d: not isinstance(d, dict)))
def test_any_non_object_payload_is_22023(conn: psycopg.Connection, doc: Any) -> None:
    before = snapshot(conn)
    with pytest.raises(psycopg.Error) as raised:
        conn.execute("SELECT * FROM runq.submit('prop', 'k', %s::jsonb)", [json.dumps(doc)])
    assert raised.value.sqlstate == "22023"
    assert (raised.value.diag.message_primary or "").startswith("payload must be a jsonb object, got ")
    assert snapshot(conn) == before
