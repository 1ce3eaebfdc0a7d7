"""The `runq` command against a real database: output, --json, exit codes
(0 ok, 1 runq refused, 2 usage or connection) and one-line errors.

Most tests call runq.cli.main in-process; a few run the installed console
script to check what a shell sees (no traceback, signals).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest
import runq
from runq import Client
from runq.cli import main


@pytest.fixture
def client(db_url: str) -> Iterator[Client]:
    with Client.connect(db_url) as c:
        yield c


@pytest.fixture(autouse=True)
def database_env(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUNQ_DATABASE_URL", db_url)


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def runq_command() -> list[str]:
    script = shutil.which("runq", path=str(Path(sys.executable).parent))
    return [script] if script else [sys.executable, "-m", "runq.cli"]


def failed_run(client: Client, **submit: Any) -> int:
    run = client.submit("acme", "report", **submit).run_id
    [c] = client.claim([0, 10, 20])
    assert c.run_id == run
    client.fail(run, c.epoch, {"code": "boom", "message": "the report blew up"})
    return run


def test_status(client: Client, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(capsys, "status") == (0, "no queued, running, waiting or failed runs\n", "")
    failed_run(client)
    client.submit("t", "k", priority=0)
    client.submit("t", "k", priority=20)
    code, out, err = run_cli(capsys, "status")
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0].split() == ["class", "ready", "scheduled", "running", "waiting", "on",
                                "children", "failed", "oldest", "ready"]
    assert lines[2].startswith("0 interactive") and lines[4].startswith("20 maintenance")
    assert lines[3].split()[:8] == ["10", "async", "0", "0", "0", "0", "0", "1"]
    code, out, _ = run_cli(capsys, "status", "--json")
    doc = json.loads(out)
    assert (doc["limits"], doc["pauses"]) == ([], [])
    rows = doc["queue_stats"]
    assert [r["priority"] for r in rows] == [0, 10, 20]
    assert rows[1]["failed"] == 1 and rows[1]["oldest_ready_age"] is None
    assert isinstance(rows[0]["oldest_ready_age"], float)
    assert rows[1]["waiting_for_children"] == 0


def test_status_shows_the_limits_and_the_pauses(client: Client,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    client.set_limit("tenant", None, 2)
    client.set_limit("tenant", "acme", 10)
    client.pause("class", "20", reason="nightly load")
    client.pause("kind", "report")
    code, out, err = run_cli(capsys, "status")  # no runs: the limits and pauses still show
    assert (code, err) == (0, "")
    assert out.startswith("no queued, running, waiting or failed runs\n\nlimit ")
    client.submit("acme", "k")
    client.claim([10])
    code, out, err = run_cli(capsys, "status")
    assert (code, err) == (0, "")
    stats, limits, pauses = out.split("\n\n")
    assert stats.splitlines()[2].split()[:5] == ["10", "async", "0", "0", "1"]
    lines = limits.splitlines()
    assert lines[0].split() == ["limit", "key", "max", "running", "running"]
    assert [line.split() for line in lines[2:]] == [["tenant", "-", "2", "-"],
                                                   ["tenant", "acme", "10", "1"]]
    lines = pauses.splitlines()
    assert lines[0].split() == ["paused", "key", "reason", "since"]
    assert lines[2].split()[:5] == ["class", "20", "maintenance", "nightly", "load"]
    assert lines[3].split()[:3] == ["kind", "report", "-"]
    assert len(lines) == 4 and pauses.endswith("\n")
    code, out, _ = run_cli(capsys, "--json", "status")
    doc = json.loads(out)
    assert doc["queue_stats"][0]["running"] == 1
    assert doc["limits"] == [
        {"scope": "tenant", "key": None, "max_running": 2, "running": None},
        {"scope": "tenant", "key": "acme", "max_running": 10, "running": 1}]
    assert [(p["scope"], p["key"], p["reason"]) for p in doc["pauses"]] == [
        ("class", "20", "nightly load"), ("kind", "report", None)]
    assert isinstance(doc["pauses"][0]["paused_at"], str)


def test_limit(client: Client, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(capsys, "limit", "tenant", "acme", "10") == (
        0, "tenant acme: at most 10 running\n", "")
    assert run_cli(capsys, "limit", "tenant", "-", "2") == (
        0, "every tenant without a limit of its own: at most 2 running\n", "")
    code, out, _ = run_cli(capsys, "--json", "limit", "kind", "report", "1")
    assert (code, json.loads(out)) == (0, {"scope": "kind", "key": "report", "max_running": 1})
    assert client.limits() == [runq.Limit("kind", "report", 1, 0),
                               runq.Limit("tenant", None, 2, None),
                               runq.Limit("tenant", "acme", 10, 0)]
    assert run_cli(capsys, "limit", "tenant", "acme", "none") == (
        0, "tenant acme: no limit of its own\n", "")
    assert run_cli(capsys, "limit", "tenant", "-", "None") == (
        0, "every tenant without a limit of its own: no limit\n", "")
    code, out, _ = run_cli(capsys, "limit", "kind", "report", "none", "--json")
    assert (code, json.loads(out)) == (0, {"scope": "kind", "key": "report",
                                           "max_running": None})
    assert client.limits() == []
    # runq judges the values: exit 1 and its message, naming the value, on one line
    for argv, names in ((["bogus", "acme", "2"], ("scope", "bogus")),
                        (["tenant", "acme", "0"], ("max_running", "0")),
                        (["kind", "-", "-5"], ("max_running", "-5"))):
        code, out, err = run_cli(capsys, "limit", *argv)
        assert (code, out) == (1, "") and err.startswith("runq limit: ")
        assert err.count("\n") == 1 and all(n in err for n in names), err
    assert client.limits() == []
    with pytest.raises(SystemExit) as exit_info:
        main(["limit", "tenant", "acme", "many"])
    assert exit_info.value.code == 2
    assert "not a whole number or none: 'many'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        main(["limit", "tenant", "acme"])
    assert exit_info.value.code == 2


def test_pause_and_resume(client: Client, capsys: pytest.CaptureFixture[str]) -> None:
    run = client.submit("acme", "k").run_id
    assert run_cli(capsys, "pause", "class", "10", "--reason", "deploy") == (
        0, "class 10 paused\n", "")
    assert run_cli(capsys, "pause", "class", "10") == (0, "class 10 was paused already\n", "")
    code, out, _ = run_cli(capsys, "--json", "pause", "tenant", "acme")
    assert (code, json.loads(out)) == (0, {"scope": "tenant", "key": "acme", "paused": True})
    assert [(p.scope, p.key, p.reason) for p in client.pauses()] == [
        ("class", "10", "deploy"), ("tenant", "acme", None)]
    assert client.claim([10]) == []
    assert run_cli(capsys, "resume", "class", "10") == (0, "class 10 resumed\n", "")
    assert run_cli(capsys, "resume", "class", "10") == (0, "class 10 was not paused\n", "")
    assert client.claim([10]) == []  # the tenant is still paused
    code, out, _ = run_cli(capsys, "resume", "tenant", "acme", "--json")
    assert (code, json.loads(out)) == (0, {"scope": "tenant", "key": "acme", "resumed": True})
    assert [c.run_id for c in client.claim([10])] == [run]
    assert client.pauses() == []
    for command, argv, value in (("pause", ["bogus", "x"], "bogus"),
                                 ("pause", ["class", "40000"], "40000"),
                                 ("resume", ["bogus", "x"], "bogus")):
        code, out, err = run_cli(capsys, command, *argv)
        assert (code, out) == (1, "") and err.startswith(f"runq {command}: ")
        assert err.count("\n") == 1 and value in err, err
    assert client.pauses() == []
    with pytest.raises(SystemExit) as exit_info:
        main(["pause", "class"])
    assert exit_info.value.code == 2


def test_inspect(client: Client, capsys: pytest.CaptureFixture[str]) -> None:
    run = client.submit("acme", "chat", {"q": 1}, session_id="s1", priority=0).run_id
    [c] = client.claim([0], worker_id="w9")
    client.begin_tool(run, c.epoch, "call-1", "search", "read_only")
    code, out, err = run_cli(capsys, "inspect", str(run))
    assert code == 0 and err == ""
    assert "status            running" in out and "0 interactive" in out
    for event in ("run.created", "run.claimed", "run.tool_started"):
        assert event in out
    assert "call-1" in out and "search" in out
    code, out, _ = run_cli(capsys, "--json", "inspect", str(run))
    doc = json.loads(out)
    assert doc["run"]["run_id"] == run and doc["run"]["status"] == "running"
    assert [e["type"] for e in doc["events"]] == ["run.created", "run.claimed",
                                                  "run.tool_started"]
    assert doc["tool_calls"][0]["call_id"] == "call-1"


def inspected_fields(out: str) -> dict[str, str]:
    """The field lines `runq inspect` prints first: name -> the cell."""
    return dict(line.split(None, 1) for line in out.split("\n\n")[0].splitlines())


def test_inspect_shows_usage_budget_and_deadline(client: Client,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    plain = client.submit("acme", "k", priority=0).run_id
    fields = inspected_fields(run_cli(capsys, "inspect", str(plain))[1])
    assert (fields["usage"], fields["budget"], fields["deadline"]) == ("{}", "-", "-")
    run = client.submit("acme", "agent", budget={"cost_usd": Decimal("2.00"),
                                                 "input_tokens": 5000},
                        timeout=timedelta(minutes=5)).run_id
    [c] = client.claim([10])
    client.record_usage(run, c.epoch, {"cost_usd": 0.1, "input_tokens": 1200})
    client.record_usage(run, c.epoch, {"cost_usd": 0.2})
    deadline = client.get_run(run).deadline
    assert deadline is not None
    code, out, err = run_cli(capsys, "inspect", str(run))
    assert (code, err) == (0, "")
    fields = inspected_fields(out)
    assert fields["usage"] == '{"cost_usd":0.3,"input_tokens":1200}'
    assert fields["budget"] == '{"cost_usd":2.00,"input_tokens":5000}'
    assert fields["deadline"] == deadline.isoformat(sep=" ", timespec="seconds")
    assert out.count("run.usage") == 2
    code, out, _ = run_cli(capsys, "--json", "inspect", str(run))
    assert code == 0 and '"cost_usd": 0.3,' in out  # the exact sum, as a JSON number
    doc = json.loads(out, parse_float=Decimal)
    assert doc["run"]["usage"] == {"cost_usd": Decimal("0.3"), "input_tokens": 1200}
    assert doc["run"]["budget"] == {"cost_usd": Decimal("2.00"), "input_tokens": 5000}
    assert datetime.fromisoformat(doc["run"]["deadline"]) == deadline
    assert [e["payload"] for e in doc["events"] if e["type"] == "run.usage"] == [
        {"cost_usd": Decimal("0.1"), "input_tokens": 1200}, {"cost_usd": Decimal("0.2")}]


def test_inspect_shows_the_parent_and_the_childrens_tree(
        client: Client, capsys: pytest.CaptureFixture[str]) -> None:
    # A parent (class 6) with children a (succeeded, with usage), b (running,
    # with a running grandchild g that has a queued child of its own, h) and c
    # (queued); each in a class of its own, so that each claim takes its run.
    root = client.submit("acme", "plan", priority=6).run_id
    [p] = client.claim([6])
    a = client.spawn(root, p.epoch, "a", "research", priority=7)
    b = client.spawn(root, p.epoch, "b", "write", priority=8)
    c = client.spawn(root, p.epoch, "c", "review", priority=5)
    assert a is not None and b is not None and c is not None
    [ca] = client.claim([7])
    client.record_usage(a, ca.epoch, {"cost_usd": Decimal("0.10")})
    client.complete(a, ca.epoch, {"ok": True})
    [cb] = client.claim([8])
    g = client.spawn(b, cb.epoch, "g", "fetch", priority=9)
    assert g is not None
    [cg] = client.claim([9])
    h = client.spawn(g, cg.epoch, "h", "page", priority=9)
    assert client.wait_children(root, p.epoch) is True

    code, out, err = run_cli(capsys, "inspect", str(root))
    assert (code, err) == (0, "")
    tree = out.split("\n\n")[1]
    assert inspected_fields(out)["parent_run_id"] == "-"
    assert inspected_fields(out)["status"] == "waiting_for_children"
    lines = tree.splitlines()
    assert lines[0].split() == ["child", "run", "kind", "status", "usage"]
    assert [line.split() for line in lines[2:]] == [
        ["a", str(a), "research", "succeeded", '{"cost_usd":0.10}'],
        ["b", str(b), "write", "running", "{}"],
        ["└", "g", str(g), "fetch", "running", "{}"],
        ["└", "h", str(h), "page", "queued", "{}"],
        ["c", str(c), "review", "queued", "{}"]]
    assert lines[5].startswith("  └ h")  # indented under g
    # Two levels: h is counted, not shown.
    code, out, _ = run_cli(capsys, "inspect", str(root), "--depth", "2")
    rows = [line.split() for line in out.split("\n\n")[1].splitlines()[2:]]
    assert rows[2] == ["└", "g", str(g), "fetch", "running", "{}"]
    assert rows[3][:5] == ["└", "…", "1", "more", "(deeper"]
    assert rows[4][0] == "c"

    # A child shows its parent; a run of neither shows neither.
    code, out, _ = run_cli(capsys, "inspect", str(g))
    assert inspected_fields(out)["parent_run_id"] == str(b)
    assert out.split("\n\n")[1] == f"parent  run {b}  write  running  usage {{}}"
    assert [line.split()[:2] for line in out.split("\n\n")[2].splitlines()[2:]] == [
        ["h", str(h)]]
    plain = client.submit("acme", "k", priority=6).run_id
    code, out, _ = run_cli(capsys, "inspect", str(plain))
    assert "parent  run" not in out and "child" not in out.split("\n\n")[1]

    code, out, _ = run_cli(capsys, "--json", "inspect", str(root))
    doc = json.loads(out, parse_float=Decimal)
    assert doc["parent"] is None and doc["run"]["parent_run_id"] is None
    assert doc["more_children"] == 0
    assert [(x["key"], x["run_id"], x["status"]) for x in doc["children"]] == [
        ("a", a, "succeeded"), ("b", b, "running"), ("c", c, "queued")]
    assert doc["children"][0]["usage"] == {"cost_usd": Decimal("0.10")}
    assert doc["children"][0]["result"] == {"ok": True}
    [grand] = doc["children"][1]["children"]
    assert (grand["key"], grand["run_id"], grand["children"][0]["run_id"]) == ("g", g, h)
    code, out, _ = run_cli(capsys, "--json", "inspect", str(g))
    doc = json.loads(out)
    assert (doc["parent"]["run_id"], doc["parent"]["status"]) == (b, "running")
    with pytest.raises(SystemExit):
        main(["inspect", str(root), "--depth", "0"])
    assert "must be 1 or more" in capsys.readouterr().err


def test_usage(client: Client, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "usage", "--since", "1h")
    assert (code, err) == (0, "") and out.startswith("no usage recorded since ")
    a = client.submit("acme", "chat").run_id
    b = client.submit("acme", "report").run_id
    c = client.submit("beta", "chat").run_id
    client.claim([10], max_runs=5)
    client.record_usage(a, 1, {"cost_usd": 0.1, "input_tokens": 1200})
    client.record_usage(a, 1, {"cost_usd": 0.2})
    client.release(a, 1)
    client.record_usage(a, 1, {"input_tokens": 30})  # fenced: in the ledger all the same
    client.record_usage(b, 1, {"cost_usd": Decimal("1.5")})
    client.record_usage(c, 1, {"cost_usd": Decimal("0.0000001"), "input_tokens": 5})

    code, out, err = run_cli(capsys, "usage", "--since", "1h")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0].split() == ["tenant", "kind", "runs", "cost_usd", "input_tokens"]
    assert [line.split() for line in lines[2:]] == [
        ["acme", "chat", "1", "0.3", "1230"],
        ["acme", "report", "1", "1.5", "-"],
        ["beta", "chat", "1", "0.0000001", "5"]]
    assert len({len(line) for line in lines}) == 1  # numbers right-aligned, a missing one too
    code, out, _ = run_cli(capsys, "usage", "--since", "1h", "--by", "tenant")
    lines = out.splitlines()
    assert code == 0 and lines[0].split() == ["tenant", "runs", "cost_usd", "input_tokens"]
    assert [line.split() for line in lines[2:]] == [["acme", "2", "1.8", "1230"],
                                                   ["beta", "1", "0.0000001", "5"]]
    code, out, _ = run_cli(capsys, "usage", "--since", "1h", "--by", "kind")
    assert code == 0 and [line.split() for line in out.splitlines()[2:]] == [
        ["chat", "2", "0.3000001", "1235"], ["report", "1", "1.5", "-"]]

    code, out, _ = run_cli(capsys, "--json", "usage", "--since", "1h")
    assert code == 0 and '"cost_usd": 0.3,' in out and "0.30000000000000004" not in out
    assert json.loads(out, parse_float=Decimal) == [
        {"tenant_id": "acme", "kind": "chat", "runs": 1,
         "usage": {"cost_usd": Decimal("0.3"), "input_tokens": 1230}},
        {"tenant_id": "acme", "kind": "report", "runs": 1, "usage": {"cost_usd": Decimal("1.5")}},
        {"tenant_id": "beta", "kind": "chat", "runs": 1,
         "usage": {"cost_usd": Decimal("0.0000001"), "input_tokens": 5}}]
    code, out, _ = run_cli(capsys, "usage", "--since", "1h", "--by", "kind", "--json")
    assert json.loads(out, parse_float=Decimal) == [
        {"kind": "chat", "runs": 2,
         "usage": {"cost_usd": Decimal("0.3000001"), "input_tokens": 1235}},
        {"kind": "report", "runs": 1, "usage": {"cost_usd": Decimal("1.5")}}]

    # ISO 8601 times; a window with nothing in it
    since = (datetime.now(timezone.utc) - timedelta(hours=1)).isoformat()
    code, out, _ = run_cli(capsys, "usage", "--since", since, "--by", "tenant")
    assert code == 0 and len(out.splitlines()) == 4
    until = (datetime.now(timezone.utc) - timedelta(minutes=30)).strftime("%Y-%m-%dT%H:%M:%SZ")
    code, out, err = run_cli(capsys, "usage", "--since", since, "--until", until)
    assert (code, err) == (0, "") and out.startswith("no usage recorded from ")
    assert run_cli(capsys, "--json", "usage", "--since", since, "--until", until)[:2] == (
        0, "[]\n")
    # runq judges the window: exit 1, its message on one line
    code, out, err = run_cli(capsys, "usage", "--since", "1h", "--until", "2h")
    assert (code, out) == (1, "") and err.startswith("runq usage: ") and err.count("\n") == 1
    for bad in (["--since", "yesterday"], ["--since", "1h", "--by", "principal"], []):
        with pytest.raises(SystemExit) as exit_info:
            main(["usage", *bad])
        assert exit_info.value.code == 2
    assert "not a time" in capsys.readouterr().err


def test_inspect_missing_run_is_exit_1_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "inspect", "424242")
    assert (code, out) == (1, "")
    assert err == "runq inspect: run 424242 not found\n"


def test_failed_lists_the_dead_letter_newest_first(client: Client,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(capsys, "failed") == (0, "the dead letter is empty\n", "")
    first = failed_run(client)
    second = failed_run(client, priority=20)
    code, out, _ = run_cli(capsys, "failed")
    lines = out.splitlines()
    assert code == 0 and "code" in lines[0] and "message" in lines[0]
    assert lines[2].split()[0] == str(second) and lines[3].split()[0] == str(first)
    assert "boom" in lines[2] and "the report blew up" in lines[2]
    code, out, _ = run_cli(capsys, "failed", "--json", "--limit", "1")
    [row] = json.loads(out)
    assert row["run_id"] == second and row["failure"]["code"] == "boom"


def test_redrive(client: Client, capsys: pytest.CaptureFixture[str]) -> None:
    run = failed_run(client)
    code, out, _ = run_cli(capsys, "redrive", str(run), "--reason", "fixed the bug")
    assert code == 0 and str(run) in out
    assert client.get_run(run).status == "queued"
    assert client.run_events(run)[-1].payload["reason"] == "fixed the bug"
    code, out, err = run_cli(capsys, "redrive", str(run))
    assert (code, out) == (1, "")
    assert err.startswith(f"runq redrive: run {run} is queued, not failed")
    assert err.count("\n") == 1


def test_redrive_into_a_busy_session(client: Client, capsys: pytest.CaptureFixture[str]) -> None:
    run = failed_run(client, session_id="s")
    busy = client.submit("acme", "report", session_id="s").run_id
    code, out, err = run_cli(capsys, "--json", "redrive", str(run))
    assert (code, out) == (1, "")
    assert str(busy) in err and err.count("\n") == 1


def test_cancel(client: Client, capsys: pytest.CaptureFixture[str]) -> None:
    queued = client.submit("t", "k").run_id
    assert run_cli(capsys, "cancel", str(queued), "--reason", "dup") == (
        0, f"run {queued}: cancelled\n", "")
    code, out, _ = run_cli(capsys, "cancel", str(queued), "--json")
    assert code == 0 and json.loads(out) == {"run_id": queued, "outcome": "already_terminal"}
    running = client.submit("t", "k").run_id
    client.claim([10])
    assert run_cli(capsys, "cancel", str(running))[1] == f"run {running}: cancel_requested\n"
    assert run_cli(capsys, "cancel", "424242")[0] == 1


def later(seconds: float, do: Any) -> threading.Thread:
    """do() in another thread, seconds from now: a worker while the command waits."""
    def go() -> None:
        time.sleep(seconds)
        do()
    thread = threading.Thread(target=go, daemon=True)
    thread.start()
    return thread


def test_wait_exit_status_is_the_runs(client: Client, db_url: str,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    runs = [client.submit("t", "k", priority=3).run_id for _ in range(3)]
    claimed = {c.run_id: c.epoch for c in client.claim([3], max_runs=3)}
    with Client.connect(db_url) as worker:
        ends = [lambda r: worker.complete(r, claimed[r]),
                lambda r: worker.fail(r, claimed[r], {"code": "boom"}),
                lambda r: worker.ask_user(r, claimed[r], {"q": 1})]
        for run, end, (code, status) in zip(runs, ends, [(0, "succeeded"), (1, "failed"),
                                                          (2, "waiting_for_user")], strict=True):
            thread = later(0.3, lambda r=run, e=end: e(r))
            assert run_cli(capsys, "wait", str(run), "--timeout", "10") == (
                code, f"run {run}: {status}\n", "")
            thread.join()
    queued = client.submit("t", "k", priority=4).run_id
    code, out, err = run_cli(capsys, "wait", str(queued), "--timeout", "0.3")
    assert (code, out, err) == (124, "", f"run {queued}: still going after 0.3 s\n")
    code, out, _ = run_cli(capsys, "wait", str(runs[0]), "--json")
    assert code == 0 and json.loads(out)["status"] == "succeeded"
    assert run_cli(capsys, "wait", "424242")[0] == 1


def test_tail_prints_the_output_until_the_run_ends(client: Client, db_url: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    run = client.submit("t", "k", priority=5).run_id
    [c] = client.claim([5])
    assert client.emit(run, c.epoch, ["Hello", {"tool": "search"}])

    def finish() -> None:
        with Client.connect(db_url) as worker:
            worker.emit(run, c.epoch, [", world"])
            worker.complete(run, c.epoch, {"ok": True})
    thread = later(0.3, finish)
    assert run_cli(capsys, "tail", str(run)) == (
        0, '1\t1\tHello\n2\t1\t{"tool": "search"}\n3\t1\t, world\n',
        f"run {run}: succeeded\n")
    thread.join()
    code, out, _ = run_cli(capsys, "tail", str(run), "--after", "2", "--json")
    assert code == 0 and [json.loads(line) for line in out.splitlines()] == [
        {"seq": 3, "epoch": 1, "chunk": ", world"}]
    with pytest.raises(SystemExit) as refused:
        main(["tail", str(run), "--after", "-1"])
    assert refused.value.code == 2
    assert "must be 0 or more, got -1" in capsys.readouterr().err


def test_orphans(client: Client, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(capsys, "orphans") == (0, "no running runs\n", "")
    client.submit("t", "k")
    client.claim([10], worker_id="host-1:42")
    time.sleep(0.01)
    code, out, _ = run_cli(capsys, "orphans", "--stale-after", "0.001")
    assert code == 0
    owner, stale, did_work, runs = out.splitlines()[2].split()[:4]
    assert (owner, stale, did_work, runs) == ("host-1:42", "yes", "no", "1")
    code, out, _ = run_cli(capsys, "orphans", "--json")
    assert json.loads(out)[0]["stale"] is False


def test_purge_in_batches(client: Client, capsys: pytest.CaptureFixture[str]) -> None:
    runs = [client.submit("t", "k").run_id for _ in range(5)]
    for _ in runs:
        [c] = client.claim([10])
        client.complete(c.run_id, c.epoch)
    kept = failed_run(client)
    assert run_cli(capsys, "purge", "--older-than-days", "1") == (
        0, "purged 0 runs finished more than 1 days ago\n", "")
    # Batches of 2: three transactions, the last one short.
    code, out, _ = run_cli(capsys, "--json", "purge", "--older-than-days", "0", "--batch", "2")
    assert (code, json.loads(out)) == (0, {"purged": 5})
    assert client.get_run(kept).status == "failed"
    code, out, _ = run_cli(capsys, "purge", "--older-than-days", "0", "--include-failed")
    assert (code, out) == (0, "purged 1 run finished more than 0 days ago\n")
    for bad, why in (("--older-than-days=-1", "must be 0 or more"), ("--batch=0", "must be 1 or more")):
        with pytest.raises(SystemExit) as exit_info:
            main(["purge", "--older-than-days", "1", bad])
        assert exit_info.value.code == 2 and why in capsys.readouterr().err


def test_sweep_once(client: Client, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(capsys, "sweep") == (0, "nothing to sweep\n", "")
    run = client.submit("t", "k", max_attempts=1).run_id
    client.claim([10], lease=timedelta(milliseconds=1))
    time.sleep(0.05)
    code, out, _ = run_cli(capsys, "sweep", "--json", "--max-runs", "10")
    assert code == 0 and json.loads(out) == [{"run_id": run, "action": "dead_lettered"}]


def test_sweep_every_until_sigterm(client: Client, db_url: str) -> None:
    proc = subprocess.Popen([*runq_command(), "sweep", "--every", "0.1", "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "RUNQ_DATABASE_URL": db_url})
    try:
        run = client.submit("t", "k", max_attempts=1).run_id
        client.claim([10], lease=timedelta(milliseconds=1))
        deadline = time.monotonic() + 10
        while client.get_run(run).status != "failed" and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    assert err == ""
    assert json.loads(out.splitlines()[0]) == {"run_id": run, "action": "dead_lettered"}


# -- schedules ----------------------------------------------------------------------


def cell(value: datetime) -> str:
    """A time as the command's tables and messages show it."""
    return value.isoformat(sep=" ", timespec="seconds")


def make_due(conn: psycopg.Connection[Any], name: str) -> None:
    """The schedule's next slot a second ago (an every schedule's first)."""
    done = conn.execute(
        "UPDATE runq.schedule_settings SET next_slot = now() - interval '1 second',"
        " created_at = CASE WHEN every IS NULL THEN created_at"
        "                   ELSE now() - interval '1 second' - every END"
        " WHERE name = %s", [name])
    assert done.rowcount == 1, name


def test_schedule_add(client: Client, conn: psycopg.Connection[Any],
                      capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "schedule", "add", "nightly", "acme", "report",
                             "--cron", "0 3 * * *", "--timezone", "Europe/Paris")
    [nightly] = client.schedules()
    assert (code, err) == (0, "")
    assert out == (f"schedule nightly created: cron 0 3 * * * (Europe/Paris), "
                   f"next slot {cell(nightly.next_slot)}\n")
    assert (nightly.tenant_id, nightly.kind, nightly.cron, nightly.every, nightly.timezone) == (
        "acme", "report", "0 3 * * *", None, "Europe/Paris")
    code, out, err = run_cli(capsys, "schedule", "add", "ping", "beta", "ping", "--every", "90s",
                             "--payload", '{"a": 1}', "--priority", "20", "--max-attempts", "5",
                             "--recovery-policy", "fail", "--queue-ttl", "10m",
                             "--timeout", "1h")
    _, ping = client.schedules()
    assert (code, err) == (0, "")
    assert out == f"schedule ping created: every 1m30s, next slot {cell(ping.next_slot)}\n"
    assert (ping.tenant_id, ping.kind, ping.cron, ping.every, ping.timezone) == (
        "beta", "ping", None, timedelta(seconds=90), "UTC")
    # Its runs carry what was given.
    make_due(conn, "ping")
    [row] = client.tick()
    assert (row.schedule, row.outcome) == ("ping", "created") and row.run_id is not None
    run = client.get_run(row.run_id)
    assert (run.tenant_id, run.kind, run.priority, run.max_attempts) == ("beta", "ping", 20, 5)
    assert run.deadline == run.created_at + timedelta(hours=1)
    assert conn.execute("SELECT recovery_policy, queue_ttl FROM runq.runs WHERE run_id = %s",
                        [row.run_id]).fetchone() == ("fail", timedelta(minutes=10))
    [c] = client.claim([20])
    assert c.run_id == row.run_id and c.payload == {"a": 1, "slot": c.payload["slot"]}
    # The same timing again: replaced, its next slot kept.
    nightly, ping = client.schedules()
    code, out, err = run_cli(capsys, "schedule", "add", "ping", "beta", "ping", "--every", "90s")
    assert (code, err) == (0, "")
    assert out == f"schedule ping replaced: every 1m30s, next slot {cell(ping.next_slot)}\n"
    assert client.schedules() == [nightly, ping]
    code, out, err = run_cli(capsys, "--json", "schedule", "add", "nightly", "beta", "digest",
                             "--cron", "30 4 * * 1-5")
    assert (code, err) == (0, "")
    doc = json.loads(out)
    replaced, _ = client.schedules()
    assert doc == {"created": False, "schedule": {
        "name": "nightly", "tenant_id": "beta", "kind": "digest", "cron": "30 4 * * 1-5",
        "every": None, "timezone": "UTC", "next_slot": replaced.next_slot.isoformat(),
        "last_slot": None, "last_run_id": None, "paused": False}}
    assert (replaced.next_slot.hour, replaced.next_slot.minute) == (4, 30)


def test_schedule_add_refuses_bad_input(client: Client,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    # runq judges the values: exit 1 and its message, naming the value, on one line
    for argv, names in ((["--cron", "61 * * * *"], ("cron", "61 * * * *")),
                        (["--cron", "bogus"], ("cron", "'bogus'")),
                        (["--cron", "0 3 * * *", "--timezone", "Mars/Base"], ("Mars/Base",)),
                        (["--every", "1h", "--priority", "40000"], ("priority", "40000")),
                        (["--every", "1h", "--recovery-policy", "sometimes"], ("sometimes",))):
        code, out, err = run_cli(capsys, "schedule", "add", "s", "acme", "k", *argv)
        assert (code, out) == (1, "") and err.startswith("runq schedule add: "), (argv, err)
        assert err.count("\n") == 1 and all(n in err for n in names), err
    assert client.schedules() == []
    # The parser's: exactly one of --cron and --every, spans and JSON objects
    for argv, why in (([], "one of the arguments --cron --every is required"),
                      (["--cron", "0 3 * * *", "--every", "1h"], "not allowed with argument"),
                      (["--every", "0s"], "not a span"),
                      (["--every", "90"], "not a span"),
                      (["--every", "1h", "--payload", "[1]"], "not a JSON object"),
                      (["--every", "1h", "--payload", "{"], "not JSON")):
        with pytest.raises(SystemExit) as exit_info:
            main(["schedule", "add", "s", "acme", "k", *argv])
        assert exit_info.value.code == 2
        assert why in capsys.readouterr().err, argv
    for argv in (["schedule"], ["schedule", "add", "s", "acme"], ["schedule", "drop"],
                 ["schedule", "bogus"]):
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        assert exit_info.value.code == 2, argv
    capsys.readouterr()
    assert client.schedules() == []


def test_schedule_list(client: Client, conn: psycopg.Connection[Any],
                       capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(capsys, "schedule", "list") == (0, "no schedules\n", "")
    assert run_cli(capsys, "schedule", "list", "--json") == (0, "[]\n", "")
    client.create_schedule("ping", "beta", "ping", every=timedelta(seconds=90))
    client.create_schedule("nightly", "acme", "report", cron="0 3 * * *",
                           timezone="Europe/Paris")
    make_due(conn, "ping")
    [row] = client.tick()
    client.pause("schedule", "nightly")
    nightly, ping = client.schedules()
    assert ping.last_slot is not None
    code, out, err = run_cli(capsys, "schedule", "list")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0].split() == ["schedule", "tenant", "kind", "timing", "next", "slot", "last",
                                "slot", "last", "run", "paused"]
    assert set(lines[1]) == {"-", " "}
    assert [line.split() for line in lines[2:]] == [
        ["nightly", "acme", "report", "cron", "0", "3", "*", "*", "*", "(Europe/Paris)",
         *cell(nightly.next_slot).split(), "-", "-", "yes"],
        ["ping", "beta", "ping", "every", "1m30s", *cell(ping.next_slot).split(),
         *cell(ping.last_slot).split(), str(row.run_id), "no"]]
    code, out, _ = run_cli(capsys, "--json", "schedule", "list")
    assert code == 0 and json.loads(out) == [
        {"name": "nightly", "tenant_id": "acme", "kind": "report", "cron": "0 3 * * *",
         "every": None, "timezone": "Europe/Paris", "next_slot": nightly.next_slot.isoformat(),
         "last_slot": None, "last_run_id": None, "paused": True},
        {"name": "ping", "tenant_id": "beta", "kind": "ping", "cron": None, "every": 90.0,
         "timezone": "UTC", "next_slot": ping.next_slot.isoformat(),
         "last_slot": ping.last_slot.isoformat(), "last_run_id": row.run_id, "paused": False}]


def test_schedule_drop(client: Client, conn: psycopg.Connection[Any],
                       capsys: pytest.CaptureFixture[str]) -> None:
    client.create_schedule("ping", "acme", "ping", every=timedelta(hours=1))
    client.create_schedule("keep", "acme", "ping", every=timedelta(hours=1))
    make_due(conn, "ping")
    [row] = client.tick()
    assert row.run_id is not None
    assert run_cli(capsys, "schedule", "drop", "ping") == (0, "schedule ping dropped\n", "")
    assert run_cli(capsys, "schedule", "drop", "ping") == (
        0, "schedule ping does not exist\n", "")
    code, out, _ = run_cli(capsys, "--json", "schedule", "drop", "keep")
    assert (code, json.loads(out)) == (0, {"name": "keep", "dropped": True})
    code, out, _ = run_cli(capsys, "schedule", "drop", "keep", "--json")
    assert (code, json.loads(out)) == (0, {"name": "keep", "dropped": False})
    assert client.schedules() == []
    assert client.get_run(row.run_id).status == "queued"  # the runs it made stay


def test_status_shows_the_schedules(client: Client, capsys: pytest.CaptureFixture[str]) -> None:
    client.create_schedule("nightly", "acme", "report", cron="0 3 * * *")
    [nightly] = client.schedules()
    code, out, err = run_cli(capsys, "status")
    assert (code, err) == (0, "")
    stats, schedules = out.split("\n\n")
    assert stats == "no queued, running, waiting or failed runs"
    lines = schedules.splitlines()
    assert lines[0].split()[:4] == ["schedule", "tenant", "kind", "timing"]
    assert [line.split() for line in lines[2:]] == [
        ["nightly", "acme", "report", "cron", "0", "3", "*", "*", "*",
         *cell(nightly.next_slot).split(), "-", "-", "no"]]
    client.pause("schedule", "nightly", reason="quiet week")
    code, out, _ = run_cli(capsys, "status")
    _, pauses, schedules = out.split("\n\n")
    assert pauses.splitlines()[2].split()[:4] == ["schedule", "nightly", "quiet", "week"]
    assert schedules.splitlines()[2].split()[-1] == "yes"
    code, out, _ = run_cli(capsys, "--json", "status")
    doc = json.loads(out)
    assert code == 0 and set(doc) == {"queue_stats", "limits", "pauses", "schedules"}
    assert doc["schedules"] == [
        {"name": "nightly", "tenant_id": "acme", "kind": "report", "cron": "0 3 * * *",
         "every": None, "timezone": "UTC", "next_slot": nightly.next_slot.isoformat(),
         "last_slot": None, "last_run_id": None, "paused": True}]


def test_worker_command_gets_its_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    assert importlib.util.find_spec("runq.pool") is not None
    with pytest.raises(SystemExit) as exit_info:
        main(["worker", "-h"])  # the module's own parser answers
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.startswith("usage: runq worker")


def test_usage_and_connection_errors_are_exit_2(capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    code, _, err = run_cli(capsys, "status", "--database-url",
                           "postgresql://postgres@127.0.0.1:1/nowhere?connect_timeout=2")
    assert code == 2 and err.startswith("runq status: ") and err.count("\n") == 1
    monkeypatch.delenv("RUNQ_DATABASE_URL")
    assert run_cli(capsys, "status") == (
        2, "", "runq status: no database: pass --database-url or set RUNQ_DATABASE_URL\n")
    with pytest.raises(SystemExit) as exit_info:
        main(["inspect", "not-a-number"])
    assert exit_info.value.code == 2
    with pytest.raises(SystemExit) as exit_info:
        main(["status", "--bogus"])
    assert exit_info.value.code == 2


def test_console_script_prints_no_traceback(db_url: str) -> None:
    env = {**os.environ, "RUNQ_DATABASE_URL": db_url}
    proc = subprocess.run([*runq_command(), "inspect", "424242"], capture_output=True,
                          text=True, env=env, timeout=60)
    assert (proc.returncode, proc.stdout) == (1, "")
    assert proc.stderr == "runq inspect: run 424242 not found\n"
    proc = subprocess.run([*runq_command(), "--json", "status"], capture_output=True,
                          text=True, env=env, timeout=60)
    assert (proc.returncode, json.loads(proc.stdout), proc.stderr) == (
        0, {"queue_stats": [], "limits": [], "pauses": [], "schedules": []}, "")
