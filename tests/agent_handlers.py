"""The agent the worker processes of tests/test_agents.py run
(``python -m runq.pool agent_handlers ...`` with tests/ on PYTHONPATH): a
pydantic-ai agent on runq (runq.agents.pydantic_ai), its model a scripted
FunctionModel, its tools writing what they do to tables of their own.

The script, by how many responses the history holds:

  1. call ``search`` (read_only);
  2. call ``send`` (non_idempotent; with ``approve`` in the payload it
     needs approval: a deferred tool);
  3. answer "done: <what send returned>" (the unknown-outcome text when
     the model was told so).

Each request the model gets is a row of agent_requests (run, the step it
answers, the epoch of the attempt, the pid), each effect of a tool a row of
agent_effects, written on a connection of their own and committed at once:
what was sent and done, whatever becomes of the run. Each request uses 100
input tokens per step and 10 output tokens, priced by PRICES.

Two more kinds delegate (runq.agents.pydantic_ai.delegate), for
tests/test_agents_delegation.py:

  agent.planner     its prompt is a list of cities ("Paris, Rome"); its
                    model (1) calls ``research`` once per city, in one
                    response (parallel tool calls): a delegation tool, each
                    call a child run of agent.researcher with the payload
                    {"prompt": city}; the handler then waits for the
                    children, and once they ended (2) answers with what
                    each returned, "; "-joined ("failed: <text>" for a
                    child that failed). What child_results gave the handler
                    is a row of agent_told each. With "child_budget" in
                    the payload, each child has a budget of 1 request.
  agent.researcher  its model (1) calls ``note`` (non_idempotent) with the
                    city, then (2) answers "<city>: <what note returned>".

RUNQ_AGENT_FAULT makes the process kill itself (SIGKILL) or stop itself
(SIGSTOP) at one point: ``before_record:N`` (model response N came, its
record not sent), ``after_record:N`` (recorded), ``in_tool:NAME`` (the
tool's effect committed, end_tool not sent), ``after_tool:NAME`` (end_tool
committed), ``stop_in_tool:NAME`` (SIGSTOP where in_tool kills). In the
planner's and the researcher's runs the points are named ``planner.`` and
``researcher.`` first (``researcher.in_tool:note``), and the planner has two
more: ``planner.after_spawn`` (a child spawned, the others maybe not) and
``planner.before_wait`` (every child spawned, wait_children not sent).
RUNQ_AGENT_INSTRUCTIONS gives the agent instructions (its code changed).
RUNQ_AGENT_FLAKY makes the model fail request 2 once (a server error),
which the agent's RetryOnModelErrors sends again.

A process works on one run at a time (the tests give it one slot): what it
writes is marked with that run's id and epoch.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import AsyncIterator
from decimal import Decimal
from typing import Any

import psycopg
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults
from pydantic_ai.capabilities import RetryOnModelErrors
from pydantic_ai.exceptions import ModelServerError, ToolFailed
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import (
    AgentInfo,
    DeltaToolCall,
    DeltaToolCalls,
    FunctionModel,
)
from pydantic_ai.usage import RequestUsage
from runq.agents.pydantic_ai import RunqDurability, child_results, delegate, durable
from runq.pool import AsyncRunContext

PRICE = {"input_tokens": Decimal("0.000003"), "output_tokens": Decimal("0.000015")}
PRICES = {"scripted": PRICE, "planner": PRICE, "researcher": PRICE}
FAULT = os.environ.get("RUNQ_AGENT_FAULT", "")
_flaky = [os.environ.get("RUNQ_AGENT_FLAKY") == "1"]
_db: psycopg.Connection[Any] | None = None
_attempt: tuple[int, int] = (0, 0)  # (run_id, epoch) of the run this process works on


def db() -> psycopg.Connection[Any]:
    global _db
    if _db is None:
        _db = psycopg.connect(os.environ["RUNQ_AGENT_DB"], autocommit=True)
    return _db


def fault(point: str) -> None:
    if FAULT == point:
        os.kill(os.getpid(), signal.SIGKILL)
    if FAULT == "stop_" + point:
        os.kill(os.getpid(), signal.SIGSTOP)


def step_of(messages: list[ModelMessage]) -> int:
    return 1 + sum(isinstance(m, ModelResponse) for m in messages)


def returned(messages: list[ModelMessage], tool: str) -> str:
    for m in messages:
        for p in getattr(m, "parts", []):
            if isinstance(p, ToolReturnPart) and p.tool_name == tool:
                return str(p.content)
    return "nothing"


def sent(step: int) -> None:
    """A request reached the model: a row of agent_requests."""
    run_id, epoch = _attempt
    db().execute("INSERT INTO agent_requests (run_id, step, epoch, pid) VALUES (%s, %s, %s, %s)",
                 [run_id, step, epoch, os.getpid()])


def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    step = step_of(messages)
    sent(step)
    if step == 2 and _flaky[0]:
        _flaky[0] = False
        raise ModelServerError("scripted", "overloaded")
    parts: list[Any]
    if step == 1:
        parts = [ToolCallPart("search", {"q": "weather"}, tool_call_id="c-search")]
    elif step == 2:
        parts = [ToolCallPart("send", {"to": "ann", "text": returned(messages, "search")},
                              tool_call_id="c-send")]
    else:
        parts = [TextPart(f"done: {returned(messages, 'send')}")]
    return ModelResponse(parts=parts, model_name="scripted",
                         usage=RequestUsage(input_tokens=100 * step, output_tokens=10))


async def stream(messages: list[ModelMessage], info: AgentInfo
                 ) -> AsyncIterator[str | DeltaToolCalls]:
    async for item in streamed(script(messages, info)):
        yield item


async def streamed(response: ModelResponse) -> AsyncIterator[str | DeltaToolCalls]:
    for i, part in enumerate(response.parts):
        if isinstance(part, TextPart):
            words = part.content.split(" ")
            for i_word, word in enumerate(words):
                yield word if i_word == 0 else " " + word
        elif isinstance(part, ToolCallPart):
            yield {i: DeltaToolCall(part.tool_name, json.dumps(part.args),
                                    tool_call_id=part.tool_call_id)}


def effect(tool: str, what: str) -> None:
    run_id, epoch = _attempt
    db().execute("INSERT INTO agent_effects (run_id, tool, epoch, pid, what)"
                 " VALUES (%s, %s, %s, %s, %s)", [run_id, tool, epoch, os.getpid(), what])


def make_agent(approve: bool) -> Agent[None, Any]:
    agent: Agent[None, Any] = Agent(
        FunctionModel(script, stream_function=stream, model_name="scripted"),
        name="scripted", output_type=[str, DeferredToolRequests],
        instructions=os.environ.get("RUNQ_AGENT_INSTRUCTIONS") or None,
        capabilities=[RetryOnModelErrors(initial_delay=0.01), RunqDurability(prices=PRICES)])

    @agent.tool_plain(metadata={"runq": {"idempotency": "read_only"}})
    def search(q: str) -> str:
        effect("search", q)
        fault("in_tool:search")
        return f"sunny ({q})"

    @agent.tool_plain(requires_approval=approve)  # non_idempotent: the default
    def send(to: str, text: str) -> str:
        effect("send", f"{to}: {text}")
        fault("in_tool:send")
        return f"sent to {to}"

    return agent


AGENTS = {False: make_agent(False), True: make_agent(True)}


def faulty(ctx: AsyncRunContext, role: str = "") -> None:
    """ctx's writes with the RUNQ_AGENT_FAULT points around them, each
    named role first."""
    record, end_tool = ctx.record_model_call, ctx.end_tool
    spawn, wait_children = ctx.spawn, ctx.wait_children

    async def record_model_call(seq: int, *args: Any, **kwargs: Any) -> bool:
        fault(f"{role}before_record:{seq}")
        ours = await record(seq, *args, **kwargs)
        fault(f"{role}after_record:{seq}")
        return ours

    async def end(call_id: str, outcome: Any) -> None:
        await end_tool(call_id, outcome)
        fault(f"{role}after_tool:{call_id.split(':')[1].removeprefix('c-')}")

    async def spawned(*args: Any, **kwargs: Any) -> int:
        child = await spawn(*args, **kwargs)
        fault(f"{role}after_spawn")
        return child

    async def wait() -> None:
        fault(f"{role}before_wait")
        await wait_children()

    ctx.record_model_call = record_model_call  # type: ignore[method-assign]
    ctx.end_tool = end  # type: ignore[method-assign]
    ctx.spawn = spawned  # type: ignore[method-assign]
    ctx.wait_children = wait  # type: ignore[method-assign]


async def agent(ctx: AsyncRunContext) -> None:
    global _attempt
    _attempt = (ctx.run_id, ctx.epoch)
    faulty(ctx)
    payload = ctx.run.payload
    approve = bool(payload.get("approve"))
    with durable(ctx):
        result = await AGENTS[approve].run(payload["prompt"])
        if isinstance(result.output, DeferredToolRequests):
            answers = [i for i in ctx.run.inputs if isinstance(i, dict) and "approve" in i]
            if not answers:
                await ctx.ask_user({"approve": [c.tool_call_id for c in result.output.approvals]})
                return
            approvals = {c.tool_call_id: bool(answers[-1]["approve"])
                         for c in result.output.approvals}
            result = await AGENTS[approve].run(
                message_history=result.all_messages(),
                deferred_tool_results=DeferredToolResults(approvals=approvals))
    await ctx.complete({"answer": result.output})


# -- delegation: agent.planner and its children, agent.researcher ----------

def prompt_of(messages: list[ModelMessage]) -> str:
    return next(str(p.content) for m in messages for p in getattr(m, "parts", [])
                if isinstance(p, UserPromptPart))


def planner_script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    step = step_of(messages)
    sent(step)
    parts: list[Any]
    if step == 1:
        cities = [c.strip() for c in prompt_of(messages).split(",")]
        parts = [ToolCallPart("research", {"prompt": city}, tool_call_id=f"c-{city.lower()}")
                 for city in cities]
    else:
        found = []
        for p in messages[-1].parts:
            if isinstance(p, ToolReturnPart) and p.tool_name == "research":
                content: Any = p.content
                if p.outcome == "success" and isinstance(content, dict):
                    found.append(str(content["answer"]))
                else:
                    found.append(f"failed: {p.content}")
        parts = [TextPart("; ".join(found))]
    return ModelResponse(parts=parts, model_name="planner",
                         usage=RequestUsage(input_tokens=100 * step, output_tokens=10))


def researcher_script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    step = step_of(messages)
    sent(step)
    city = prompt_of(messages)
    parts: list[Any]
    if step == 1:
        parts = [ToolCallPart("note", {"text": city}, tool_call_id="c-note")]
    else:
        parts = [TextPart(f"{city}: {returned(messages, 'note')}")]
    return ModelResponse(parts=parts, model_name="researcher",
                         usage=RequestUsage(input_tokens=100 * step, output_tokens=10))


async def planner_stream(messages: list[ModelMessage], info: AgentInfo
                         ) -> AsyncIterator[str | DeltaToolCalls]:
    async for item in streamed(planner_script(messages, info)):
        yield item


async def researcher_stream(messages: list[ModelMessage], info: AgentInfo
                            ) -> AsyncIterator[str | DeltaToolCalls]:
    async for item in streamed(researcher_script(messages, info)):
        yield item


def make_planner(child_budget: dict[str, int] | None) -> Agent[None, Any]:
    return Agent(
        FunctionModel(planner_script, stream_function=planner_stream, model_name="planner"),
        name="planner", output_type=[str, DeferredToolRequests],
        tools=[delegate("agent.researcher", name="research", budget=child_budget,
                        description="Research one city: give the city as the prompt.")],
        capabilities=[RunqDurability(prices=PRICES)])


# With "child_budget" in the payload, each child has a budget of 1 request.
PLANNERS = {False: make_planner(None), True: make_planner({"requests": 1})}

RESEARCHER: Agent[None, Any] = Agent(
    FunctionModel(researcher_script, stream_function=researcher_stream,
                  model_name="researcher"),
    name="researcher", capabilities=[RunqDurability(prices=PRICES)])


@RESEARCHER.tool_plain  # non_idempotent: the default
def note(text: str) -> str:
    effect("note", text)
    fault("researcher.in_tool:note")
    return f"noted {text}"


def told(results: DeferredToolResults) -> None:
    run_id, epoch = _attempt
    for call_id, outcome in results.calls.items():
        failed, text = ((True, outcome.message) if isinstance(outcome, ToolFailed)
                        else (False, json.dumps(outcome)))
        db().execute("INSERT INTO agent_told (run_id, epoch, call_id, failed, outcome)"
                     " VALUES (%s, %s, %s, %s, %s)", [run_id, epoch, call_id, failed, text])


async def planner(ctx: AsyncRunContext) -> None:
    global _attempt
    _attempt = (ctx.run_id, ctx.epoch)
    faulty(ctx, "planner.")
    planner_agent = PLANNERS[bool(ctx.run.payload.get("child_budget"))]
    with durable(ctx):
        result = await planner_agent.run(ctx.run.payload["prompt"])
        while isinstance(result.output, DeferredToolRequests):
            results = await child_results(ctx, result.output)
            if results is None:
                return  # waiting for the children: resumed when the last one ends
            told(results)
            result = await planner_agent.run(message_history=result.all_messages(),
                                             deferred_tool_results=results)
    await ctx.complete({"answer": result.output})


async def researcher(ctx: AsyncRunContext) -> None:
    global _attempt
    _attempt = (ctx.run_id, ctx.epoch)
    faulty(ctx, "researcher.")
    with durable(ctx):
        result = await RESEARCHER.run(ctx.run.payload["prompt"])
    await ctx.complete({"answer": result.output})


HANDLERS = {"agent.scripted": agent, "agent.planner": planner, "agent.researcher": researcher}
