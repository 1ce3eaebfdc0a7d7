"""Handlers the worker processes of tests/test_faults.py run
(``python -m runq.pool fault_handlers ...`` with tests/ on PYTHONPATH).

``agent`` is a small agent loop shaped like the real thing: per step a
turn, one tool call and a checkpoint at the tool boundary, with short sleeps
between the writes so that faults land in the middle of runs. The payload
says how many steps and how long each pause is.

On a resumed claim it continues from the newest checkpoint and reads the
run's tool calls: a call that finished before its checkpoint was written is
not run again (its outcome is reused); a ``retryable`` one is begun again
under the same call_id; an ``uncertain`` one (a non-idempotent call whose
lease died) is reported as an unknown outcome and never re-executed, as the
contract asks. The result says which epoch completed the run, so the test
can check that the completing write was the current one.
"""

from __future__ import annotations

import time
from typing import Any

from runq.pool import RunContext

# Odd steps call a non-idempotent tool, so a lease that dies inside one makes
# the call uncertain; even steps call a read-only one, which becomes retryable.
TOOLS = ("search", "read_only"), ("charge", "non_idempotent")


def agent(ctx: RunContext) -> dict[str, Any]:
    payload = ctx.run.payload
    steps = int(payload["steps"])
    pause = float(payload["pause"])
    step = int((ctx.run.checkpoint or {}).get("step", 0))
    calls = {c.call_id: c for c in ctx.tool_calls()} if ctx.run.resumed else {}
    unknown: list[str] = []
    retried: list[str] = []
    while step < steps:
        ctx.begin_turn()
        call_id = f"step-{step}"
        tool, idempotency = TOOLS[step % 2]
        prior = calls.get(call_id)
        if prior is not None and prior.status == "finished":
            pass  # done before the last checkpoint was written: reuse, never redo
        elif prior is not None and prior.status == "uncertain":
            unknown.append(call_id)  # "the outcome is unknown", told to the model
        else:
            if prior is not None:
                retried.append(call_id)
            ctx.begin_tool(call_id, tool, idempotency, {"step": step})
            time.sleep(pause)
            ctx.end_tool(call_id, {"step": step, "epoch": ctx.epoch})
        step += 1
        ctx.checkpoint({"step": step, "epoch": ctx.epoch})
        time.sleep(pause)
    return {"epoch": ctx.epoch, "attempt": ctx.run.attempt, "steps": step,
            "unknown": unknown, "retried": retried}


HANDLERS = {"agent": agent}
