"""Client and AsyncClient come from one definition of each call: mypy --strict
must still see Client's methods return the result and AsyncClient's return a
coroutine of it, and at run time each method must look like the method it
was before (name, signature, docstring; a coroutine function on AsyncClient).
No database: nothing here connects."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from pathlib import Path

import pytest

from runq import AsyncClient, Client

# A check of the repository's files alone: no server version changes it.
pytestmark = pytest.mark.once

SRC = Path(__file__).resolve().parent.parent / "python_client" / "src"

CALLS = [
    "submit", "deliver_input", "cancel", "get_run", "run_events",
    "claim", "heartbeat", "heartbeat_many", "complete", "complete_many", "complete_and_claim", "fail", "release", "ask_user", "checkpoint",
    "begin_turn", "begin_tool", "end_tool", "tool_calls",
    "sweep", "redrive", "orphan_report", "queue_stats", "dead_letter", "purge",
    "set_limit", "limits", "pause", "resume", "pauses",
    "record_usage", "set_budget", "usage_report", "list_runs", "throughput", "recovery_totals",
    "create_schedule", "drop_schedule", "tick", "schedules",
    "watch", "unwatch", "read_output", "emit", "record_model_call", "model_calls",
    "spawn", "wait_children", "children",
]
# Not one query each (the shared dispatcher of runq.waiting): the same
# names and signatures on both clients, awaited or iterated on AsyncClient.
WAITS = ["wait", "stream"]

SNIPPET = '''\
from datetime import timedelta

import psycopg

from runq import AsyncClient, Client


async def check(client: Client, aclient: AsyncClient) -> None:
    reveal_type(client.submit("t", "k"))
    pending = aclient.submit("t", "k")
    reveal_type(pending)
    reveal_type(await pending)
    reveal_type(await aclient.claim([0], kinds=["k"]))
    reveal_type(client.purge(timedelta(0)))
    reveal_type(client.claim)
    reveal_type(Client.heartbeat)
    reveal_type(AsyncClient.heartbeat)
    client.submit("t", "k", prority=1)
    client.heartbeat(1)
    Client(await psycopg.AsyncConnection.connect(""))
    reveal_type(client.set_limit)
    reveal_type(await aclient.set_limit("tenant", None, 2))
    reveal_type(client.limits())
    reveal_type(await aclient.pauses())
    reveal_type(client.pause("class", "10", reason="deploy"))
    client.pause("class", 10)
    reveal_type(client.spawn(1, 1, "k", "kind", {"n": 1}, priority=0))
    reveal_type(await aclient.children(1))
    reveal_type(client.wait_children(1, 1))
'''

REVEALED = [
    "runq.types.Submitted",
    "typing.Coroutine[Any, Any, runq.types.Submitted]",
    "runq.types.Submitted",
    "list[runq.types.ClaimedRun]",
    "int",
    "def (classes: typing.Sequence[int], *, worker_id: str | None =,"
    " lease: datetime.timedelta | None =, max_runs: int | None =,"
    " kinds: typing.Sequence[str] | None =) -> list[runq.types.ClaimedRun]",
    "def (runq.client.Client, run_id: int, epoch: int) -> bool",
    "def (runq.client.AsyncClient, run_id: int, epoch: int) -> typing.Coroutine[Any, Any, bool]",
    "def (scope: str, key: str | None, max_running: int | None)",
    "None",
    "list[runq.types.Limit]",
    "list[runq.types.Pause]",
    "bool",
    "int | None",
    "list[runq.types.ChildRun]",
    "bool",
]

# (line in SNIPPET, what mypy says there)
ERRORS = [
    (11, 'Value of type "Coroutine[Any, Any, Submitted]" must be used'),  # a coroutine left unused
    (18, 'Unexpected keyword argument "prority"'),
    (19, "Too few arguments"),  # heartbeat without its epoch
    (20, 'Argument 1 to "Client" has incompatible type "AsyncConnection'),
    (26, 'Argument 2 has incompatible type "int"; expected "str"'),  # the class as text
]


def test_mypy_sees_results_on_client_and_coroutines_on_async_client(tmp_path: Path) -> None:
    (tmp_path / "snippet.py").write_text(SNIPPET)
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / "cache"),
         "snippet.py"],
        cwd=tmp_path, env={**os.environ, "MYPYPATH": str(SRC)}, capture_output=True, text=True)
    lines = proc.stdout.replace("builtins.", "").splitlines()  # older mypy spells builtins out
    revealed = [line.split('Revealed type is "', 1)[1][:-1] for line in lines
                if "Revealed type is" in line]
    assert revealed == REVEALED, proc.stdout
    errors = [line for line in lines if ": error: " in line]
    assert len(errors) == len(ERRORS), proc.stdout
    for error, (line, text) in zip(errors, ERRORS, strict=True):
        assert error.startswith(f"snippet.py:{line}: error: ") and text in error, proc.stdout


def test_the_calls_are_the_same_methods_on_both_clients() -> None:
    for name in CALLS:
        sync, awaited = getattr(Client, name), getattr(AsyncClient, name)
        assert (sync.__name__, sync.__qualname__) == (name, f"Client.{name}")
        assert (awaited.__name__, awaited.__qualname__) == (name, f"AsyncClient.{name}")
        assert sync.__doc__ and sync.__doc__.startswith(("runq.", "The runq.")), name
        assert awaited.__doc__ == sync.__doc__
        assert inspect.signature(awaited) == inspect.signature(sync)
        assert not inspect.iscoroutinefunction(sync) and inspect.iscoroutinefunction(awaited)
    for name in WAITS:
        sync, awaited = getattr(Client, name), getattr(AsyncClient, name)
        assert inspect.signature(awaited).parameters == inspect.signature(sync).parameters
    assert inspect.iscoroutinefunction(AsyncClient.wait)
    assert inspect.isasyncgenfunction(AsyncClient.stream)
    public = {n for n in dir(Client) if not n.startswith("_")}
    assert public == {*CALLS, *WAITS, "connect", "close"}
    assert {n for n in dir(AsyncClient) if not n.startswith("_")} == public
    assert str(inspect.signature(Client.complete)) == (
        "(self, run_id: 'int', epoch: 'int', result: 'Any' = None) -> 'bool'")
    assert str(inspect.signature(Client.dead_letter)) == (
        "(self, max_runs: 'int | None' = None) -> 'list[types.Run]'")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_an_async_call_does_nothing_until_awaited(anyio_backend: str) -> None:
    client = AsyncClient.connect("postgresql://nobody@127.0.0.1:1/none")
    pending = client.queue_stats()  # not open: raises only when awaited
    assert inspect.iscoroutine(pending)
    with pytest.raises(RuntimeError, match="AsyncClient on a conninfo string is not open"):
        await pending
    with pytest.raises(RuntimeError, match="Client on a conninfo string is not open"):
        Client.connect("postgresql://nobody@127.0.0.1:1/none").queue_stats()
