"""The handlers the demo's worker processes run (``python -m runq.pool demo_handlers``).

Each pretends to be an agent loop: a turn (begin_turn before the "model
call"), tool calls bracketed by begin_tool/end_tool, a checkpoint at a tool
boundary, a little sleep. Every write goes through the RunContext, so a
fenced or cancelled run raises RunStopped and the handler writes nothing
more. A few handlers hang on their first attempt so the demo can kill or
freeze the worker holding them; on the resumed attempt they finish (or, for
a run with a budget, go on until the begin_turn gate stops them).

demo.agent is a real pydantic-ai agent made durable by runq
(runq.agents.pydantic_ai), its model a scripted FunctionModel (no network):
request 1 calls ``search`` (read_only), request 2 calls ``send``
(non_idempotent), request 3 answers "done: <what send returned>". On the
run's first epoch ``send`` does its effect (an output chunk) and then hangs,
so the demo can kill its worker with the call started and not ended.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from contextvars import ContextVar
from decimal import Decimal
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel

from runq.agents.pydantic_ai import RunqDurability, durable
from runq.pool import AsyncRunContext, Handler, RunContext, RunStopped

__all__ = ["HANDLERS"]


def _sleep(ctx: RunContext, seconds: float) -> None:
    """Sleep, but stop as soon as the run is no longer ours."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if ctx.stop_requested:
            raise RunStopped(f"run {ctx.run_id} epoch {ctx.epoch} is no longer ours")
        time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))


def chat(ctx: RunContext) -> Any:
    """One turn with one read-only tool call."""
    ctx.begin_turn()
    ctx.begin_tool("search-1", "web_search", "read_only", {"q": ctx.run.kind})
    _sleep(ctx, float(ctx.run.payload.get("seconds", 0.2)))
    ctx.end_tool("search-1", {"hits": 3})
    ctx.checkpoint({"step": 1})
    return {"answer": "done", "epoch": ctx.epoch}


def research(ctx: RunContext) -> Any:
    """First attempt: two tool calls started (one idempotent, one not), then
    a hang until the worker dies. Resumed: report what the dead epoch left."""
    if ctx.run.resumed:
        calls = {c.call_id: c.status for c in ctx.tool_calls()}
        ctx.begin_turn()  # the model is told: fetch may be retried, email is unknown
        ctx.begin_tool("fetch-2", "fetch_page", "idempotent", {"url": "https://example.com"})
        ctx.end_tool("fetch-2", {"status": 200})
        return {"resumed_from": ctx.run.checkpoint, "dead_epoch_tool_calls": calls}
    ctx.begin_turn()
    ctx.begin_tool("search-1", "web_search", "read_only", {"q": "runq"})
    ctx.end_tool("search-1", {"hits": 3})
    ctx.checkpoint({"step": 1, "hits": 3})
    ctx.begin_tool("fetch-1", "fetch_page", "idempotent", {"url": "https://example.com"})
    ctx.begin_tool("email-1", "send_email", "non_idempotent", {"to": "ops@example.com"})
    _sleep(ctx, float(ctx.run.payload.get("hang", 60)))
    return {"unreachable": True}


def slow(ctx: RunContext) -> Any:
    """First attempt: a turn, a checkpoint, then a long pause (the demo
    freezes the worker in it). Resumed: finish at once."""
    if ctx.run.resumed:
        ctx.begin_turn()
        ctx.checkpoint({"step": 2})
        return {"finished_in_epoch": ctx.epoch}
    ctx.begin_turn()
    ctx.checkpoint({"step": 1})
    _sleep(ctx, float(ctx.run.payload.get("hang", 60)))
    ctx.checkpoint({"step": 2})  # a thawed worker never gets here: it was fenced
    return {"finished_in_epoch": ctx.epoch}


def ask(ctx: RunContext) -> Any:
    """Ask the user a question; resumed with the answer in ``inputs``."""
    ctx.begin_turn()
    if not ctx.run.inputs:
        ctx.ask_user({"text": "Which city should I book the hotel in?"})
        return None
    return {"booked_in": ctx.run.inputs[-1].get("city"), "inputs": ctx.run.inputs}


def metered(ctx: RunContext) -> Any:
    """A run with a budget: each turn is begin_turn (the gate), a model call
    whose usage is recorded, and a checkpoint. The first attempt hangs after
    payload["hang_after"] turns (the demo kills its worker); the resumed one
    first writes down what the claim says was spent before it (a read-only
    "plan" tool call, its args the claimed run's usage and budget), then
    takes turns until the gate stops it."""
    per_turn: dict[str, int | Decimal] = {"cost_usd": Decimal(str(ctx.run.payload["cost_usd"])),
                "input_tokens": int(ctx.run.payload["input_tokens"])}
    turn = int((ctx.run.checkpoint or {}).get("turn", 0))
    if ctx.run.resumed:
        plan = f"plan-{ctx.epoch}"
        ctx.begin_tool(plan, "plan", "read_only",
                       {"spent_before": ctx.run.usage, "budget": ctx.run.budget})
        ctx.end_tool(plan, {"turns_from": turn + 1})
    try:
        while True:
            ctx.begin_turn()  # RunStopped once a total has reached its budget
            ctx.record_usage(per_turn)  # what the model call cost
            turn += 1
            ctx.checkpoint({"turn": turn})
            if not ctx.run.resumed and turn >= int(ctx.run.payload["hang_after"]):
                _sleep(ctx, float(ctx.run.payload.get("hang", 60)))
    except RunStopped as stopped:
        # In the worker's log, where the demo reads it: why the run was taken away.
        print(f"demo.metered run {ctx.run_id} epoch {ctx.epoch} stopped after turn {turn}: "
              f"reason {stopped.reason}", flush=True)
        raise


def broken(ctx: RunContext) -> Any:
    """Raises: the pool fails the run with the exception's class and message."""
    ctx.begin_turn()
    raise ValueError("the invoice total is negative")


# The scripted agent of demo.agent: USD per token of its model.
PRICES = {"demo-model": {"input_tokens": Decimal("0.000003"),
                         "output_tokens": Decimal("0.000015")}}
_agent_ctx: ContextVar[AsyncRunContext] = ContextVar("demo_agent_ctx")  # for its tools


def _returned(messages: list[ModelMessage], tool: str) -> str:
    """What the tool call returned to the model (the unknown-outcome text
    for a call cut off on an earlier attempt)."""
    for m in messages:
        for p in getattr(m, "parts", []):
            if isinstance(p, ToolReturnPart) and p.tool_name == tool:
                return str(p.content)
    return "nothing"


def _script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """The model: what it answers to request n (n - 1 responses so far).
    Its usage is FunctionModel's estimate, priced by PRICES."""
    n = 1 + sum(isinstance(m, ModelResponse) for m in messages)
    parts: list[TextPart | ToolCallPart]
    if n == 1:
        parts = [ToolCallPart("search", {"q": "weather in Lisbon"}, tool_call_id="c-search")]
    elif n == 2:
        parts = [ToolCallPart("send", {"to": "ann", "text": _returned(messages, "search")},
                              tool_call_id="c-send")]
    else:
        parts = [TextPart(f"done: {_returned(messages, 'send')}")]
    return ModelResponse(parts=parts, model_name="demo-model")


async def _stream(messages: list[ModelMessage], info: AgentInfo
                  ) -> AsyncIterator[str | DeltaToolCalls]:
    for i, part in enumerate(_script(messages, info).parts):
        if isinstance(part, TextPart):
            yield part.content
        elif isinstance(part, ToolCallPart):
            yield {i: DeltaToolCall(part.tool_name, json.dumps(part.args),
                                    tool_call_id=part.tool_call_id)}


demo_agent: Agent[None, str] = Agent(
    FunctionModel(_script, stream_function=_stream, model_name="demo-model"),
    name="demo", capabilities=[RunqDurability(prices=PRICES)])


@demo_agent.tool_plain(metadata={"runq": {"idempotency": "read_only"}})
def search(q: str) -> str:
    return f"sunny, 24 C ({q})"


@demo_agent.tool_plain  # non_idempotent: the default
async def send(to: str, text: str) -> str:
    ctx = _agent_ctx.get()
    await ctx.emit({"sent": {"to": to, "text": text}})  # the effect, for the demo to see
    if ctx.epoch == 1:
        await asyncio.sleep(float(ctx.run.payload.get("hang", 60)))  # the demo kills us here
    return f"sent to {to}"


async def agent(ctx: AsyncRunContext) -> Any:
    """The scripted agent, durable: each model request journaled (replayed
    on a later attempt), each tool call a tool call of the run."""
    _agent_ctx.set(ctx)
    with durable(ctx) as journal:
        result = await demo_agent.run(ctx.run.payload["prompt"])
    return {"answer": result.output, "replayed": journal.replayed, "sent": journal.sent}


HANDLERS: dict[str, Handler] = {
    "demo.chat": chat,
    "demo.research": research,
    "demo.slow": slow,
    "demo.ask": ask,
    "demo.broken": broken,
    "demo.metered": metered,
    "demo.agent": agent,
}
