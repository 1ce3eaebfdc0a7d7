"""pydantic-ai agents on runq: a durability capability for pydantic-ai's
public extension point (pydantic_ai.durable_exec), whose units are runq's
(runq.agents.journal). Used from a pool handler::

    agent = Agent(model, name="support", tools=[...], capabilities=[RunqDurability()])

    async def handler(ctx):
        with durable(ctx):
            result = await agent.run(ctx.run.payload["prompt"])
        await ctx.complete({"answer": result.output})

Inside ``durable(ctx)`` each model request of the agent is a journaled unit
(gated, paid and recorded once; replayed on a later attempt) and each tool
call a tool call of the run, with the idempotency class its metadata
declares (``metadata={"runq": {"idempotency": "read_only"}}``; none declared:
``non_idempotent``, the safe default). Outside it the agent runs as it would
without the capability.

Tool discovery runs in the handler, not as a unit: function tools are
declared in code, so a later attempt finds the same ones. Waits the agent
makes between polls of a model's server-side job are plain sleeps of the
handler (runq holds no timer for them): a later attempt waits again.

An agent delegates to another agent, run as a child run, through a tool
that ``delegate(kind, description=...)`` makes: a deferred tool whose call
spawns the child (its key made from the call, so a later attempt gets the
same child) and leaves the call pending. The agent's run then ends with
``DeferredToolRequests`` among its output types, and ``child_results`` waits
for the children (``ctx.wait_children``: the handler returns) or, once every
one has ended, gives their results to continue with::

    research = delegate("agent.researcher", description="Research a topic.")
    agent = Agent(model, name="planner", tools=[research],
                  output_type=[str, DeferredToolRequests], capabilities=[RunqDurability()])

    async def planner(ctx):
        with durable(ctx):
            result = await agent.run(ctx.run.payload["prompt"])
            while isinstance(result.output, DeferredToolRequests):
                results = await child_results(ctx, result.output)
                if results is None:
                    return  # waiting for the children: resumed when the last one ends
                result = await agent.run(message_history=result.all_messages(),
                                         deferred_tool_results=results)
        await ctx.complete({"answer": result.output})
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from collections.abc import AsyncIterable, Iterator, Mapping
from contextvars import ContextVar
from datetime import timedelta
from decimal import Decimal
from typing import Any

from pydantic_ai import DeferredToolRequests, DeferredToolResults, Tool
from pydantic_ai import messages as _messages
from pydantic_ai.durable_exec import (
    JSON_CODEC,
    BaseDurabilityCapability,
    DurabilityEngineSpec,
    DurableOperationBackend,
    DurableOperationId,
    JournalCallableOperationBackend,
    ModelRequestId,
    RoleBasedOperationConfig,
    ToolsetCallToolId,
)
from pydantic_ai.exceptions import CallDeferred, ModelRetry, ToolFailed, UserError
from pydantic_ai.tools import AgentDepsT, RunContext
from pydantic_core import to_jsonable_python

from runq.agents.journal import UNKNOWN_OUTCOME, Journal, request_hash
from runq.types import ChildRun
from runq.worker.context import AsyncRunContext

__all__ = ["Prices", "RunqDurability", "child_key", "child_outcome", "child_results", "delegate",
           "durable"]

# Per model name, the price of one unit of each usage key in USD, say
# {"gpt-x": {"input_tokens": Decimal("0.000003"), "output_tokens": ...}}:
# used for a response whose usage carries no cost of its own.
Prices = Mapping[str, Mapping[str, Decimal]]

_journal: ContextVar[Journal | None] = ContextVar("runq_agent_journal", default=None)

# Keys of a request's JSON that differ between attempts at the same request:
# when its parts were made, the pydantic-ai run it belongs to, and how an
# earlier response came (its duration, the failed attempts a retrying
# capability notes on it outside the unit that journaled it).
_VOLATILE = frozenset({"timestamp", "run_id", "conversation_id", "duration", "failed_attempts"})
# RequestUsage fields recorded in the ledger, when not zero.
_TOKENS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")


@contextlib.contextmanager
def durable(ctx: AsyncRunContext) -> Iterator[Journal]:
    """Within it, agents with RunqDurability run as units of ctx's run."""
    journal = Journal(ctx)
    token = _journal.set(journal)
    try:
        yield journal
    finally:
        _journal.reset(token)


def _stable(messages: Any) -> Any:
    """The messages' JSON without what differs between attempts at the same
    request, at the places pydantic-ai puts it: on a message and its parts."""
    def strip(item: Any) -> Any:
        return ({k: v for k, v in item.items() if k not in _VOLATILE}
                if isinstance(item, dict) else item)
    return [{**strip(m), "parts": [strip(p) for p in m.get("parts", [])]}
            if isinstance(m, dict) else m for m in messages]


def _digest(model_name: str, cache_key: tuple[object, ...]) -> str:
    # ModelRequestParams projected: model_id, messages, settings, request
    # parameters (and the run context, which is left out: it is the run's);
    # and the model's name, which model_id leaves out for the agent's own.
    model_id, messages, settings, parameters = cache_key[:4]
    return request_hash([model_name, *to_jsonable_python(
        [model_id, _stable(to_jsonable_python(messages, fallback=str)), settings, parameters],
        fallback=str)])


def _texts(response: _messages.ModelResponse) -> str:
    return "".join(p.content for p in response.parts if isinstance(p, _messages.TextPart))


class _Backend(JournalCallableOperationBackend[Any]):
    def __init__(self, capability: RunqDurability[Any]) -> None:
        self.capability = capability
        super().__init__(agent_name=capability.name, config=RoleBasedOperationConfig(
            model=None, event=None, capability=None, tool=None,
            resolve_tool=lambda _id, tool, name: capability._build_resolve_tool_config(None)(
                tool, name)))  # type: ignore[arg-type]

    async def execute(self, *, operation_id: DurableOperationId, name: str,
                      body: Any, cache_key: tuple[object, ...], config: Any) -> object:
        journal = _journal.get()
        if journal is None:
            return await body()
        if isinstance(operation_id, ModelRequestId):
            return await self._model_request(journal, body,
                                             _digest(operation_id.model_name, cache_key))
        if isinstance(operation_id, ToolsetCallToolId):
            tool, args, run_context = cache_key[0], cache_key[1], cache_key[2]
            assert isinstance(tool, str) and isinstance(run_context, RunContext)
            declared = (config or {}).get("idempotency", "non_idempotent")
            # Named by the response that asked for it (providers reuse ids
            # across responses); an approved call's run is a call of its own,
            # apart from the one that asked for approval.
            call_id = f"{journal.seq}:{run_context.tool_call_id or name}"
            if run_context.tool_call_approved:
                call_id += ":approved"
            return await journal.tool_call(
                call_id, tool, declared,
                to_jsonable_python(args, fallback=str), body,
                lambda: {"result": UNKNOWN_OUTCOME, "kind": "tool_return"})
        return await body()

    async def _model_request(self, journal: Journal, body: Any, digest: str) -> object:
        emit = self.capability.emit_text

        async def send() -> tuple[Any, Mapping[str, Decimal] | None]:
            payload = await body()
            response = JSON_CODEC.load(_messages.ModelResponse, payload)
            return payload, self.capability.usage(response)

        async def replayed(payload: Any) -> None:
            text = _texts(JSON_CODEC.load(_messages.ModelResponse, payload))
            if emit and text:
                await journal.ctx.emit(text)

        return await journal.model_request(digest, send, replayed)


class RunqDurability(BaseDurabilityCapability[AgentDepsT]):
    """Makes an agent durable on runq: see the module's text.

    prices: what a response without a cost of its own costs (Prices);
    emit_text: the text the model streams goes out as the run's output
    (ctx.emit), a chunk per delta, and a replayed response's text again as
    one chunk."""

    engine_spec = DurabilityEngineSpec(
        engine_name="runq",
        durable_unit_noun="unit",
        durable_container_noun="run",
        codec=JSON_CODEC,  # units are journaled as jsonb
        wrapped_toolset_kinds=frozenset({"function", "mcp", "dynamic"}),
        toolset_lifecycles={"function": "enter-always", "mcp": "enter-in-durable-unit",
                            "dynamic": "enter-never"},
        journal_discovery=False,
        sequential_tools_in_durable_context=False,
        tool_config_key="runq",
    )

    def __init__(self, *, prices: Prices | None = None, emit_text: bool = True,
                 name: str | None = None) -> None:
        super().__init__(name=name, event_stream_handler=self._emit if emit_text else None)
        self.prices: Prices = prices or {}
        self.emit_text = emit_text
        self._backend: _Backend | None = None

    @property
    def in_durable_context(self) -> bool:
        return _journal.get() is not None

    def get_durable_operation_backend(self) -> DurableOperationBackend[Any]:
        if self._backend is None or self._backend.capability is not self:
            self._backend = _Backend(self)
        return self._backend

    def usage(self, response: _messages.ModelResponse) -> dict[str, Decimal]:
        """What a response cost, for runq's ledger: the request itself
        (requests: 1), its tokens, and cost_usd (the response's own cost, else
        the price table's for its model, else none)."""
        usage: dict[str, Decimal] = {"requests": Decimal(1)}
        for key in _TOKENS:
            if value := getattr(response.usage, key, 0):
                usage[key] = Decimal(value)
        cost = getattr(response.usage, "cost", None)
        if cost is None and (price := self.prices.get(response.model_name or "")):
            cost = sum((Decimal(usage.get(k, 0)) * Decimal(p) for k, p in price.items()),
                       Decimal(0))
        if cost is not None:
            usage["cost_usd"] = Decimal(cost)
        return usage

    @staticmethod
    async def _emit(run_context: RunContext[Any],
                    events: AsyncIterable[_messages.AgentStreamEvent]) -> None:
        journal = _journal.get()
        async for event in events:
            if journal is None:
                continue
            text = None
            if isinstance(event, _messages.PartStartEvent) and isinstance(event.part,
                                                                         _messages.TextPart):
                text = event.part.content
            elif isinstance(event, _messages.PartDeltaEvent) and isinstance(
                    event.delta, _messages.TextPartDelta):
                text = event.delta.content_delta
            if text:
                await journal.ctx.emit(text)


# -- delegation: an agent's tool call as a child run ------------------------

# Where a delegation call's CallDeferred metadata names its child, in
# DeferredToolRequests.metadata: {"run_id": ..., "key": ..., "kind": ...}.
CHILD = "runq_child"
TERMINAL = frozenset({"succeeded", "failed", "cancelled"})
# The parameters of a delegation tool that declares none of its own.
PROMPT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"prompt": {"type": "string", "description": (
        "The task for the other agent, in full: it sees nothing of this conversation.")}},
    "required": ["prompt"],
    "additionalProperties": False,
}
_KEY_LIMIT = 256  # runq.spawn's key: 1 to 256 characters
# Keys of a failure that say when and in which attempt, not what: the model
# is not told them.
_BOOKKEEPING = frozenset({"at", "attempt", "epoch"})


def child_key(seq: int, tool_call_id: str) -> str:
    """The child's key among its parent's children: the tool call's id,
    named by the response that made the call (as a tool call of the run is:
    providers reuse ids across responses), so a later attempt, replaying
    that response, spawns under the same key and gets the same child."""
    key = f"{seq}:{tool_call_id}"
    if len(key) > _KEY_LIMIT:
        key = f"{seq}:sha256:{hashlib.sha256(tool_call_id.encode()).hexdigest()}"
    return key


def delegate(kind: str, *, description: str, name: str | None = None,
             parameters: Mapping[str, Any] | None = None, priority: int | None = None,
             max_attempts: int = 3, recovery_policy: str = "resume",
             timeout: timedelta | None = None,
             budget: Mapping[str, int | float | Decimal] | None = None) -> Tool[Any]:
    """A tool that delegates to another agent: each call spawns a child run
    of ``kind`` (ctx.spawn; the other options are spawn's) whose payload is
    the call's arguments, then defers the call (CallDeferred): the agent's
    run ends with the call among DeferredToolRequests.calls, and
    ``child_results`` answers it with the child's result.

    The tool takes ``parameters`` (a JSON schema of an object; the default
    is one string, ``prompt``) and is named ``name`` (default: kind with
    each character a tool name cannot hold made ``_``). It runs outside
    the journal's tool calls (``durable=False``): runq.spawn's key is what
    makes it take effect once. Called outside ``durable(ctx)`` it raises
    UserError: there is no run to spawn from."""
    schema = dict(PROMPT_SCHEMA if parameters is None else parameters)
    tool_name = name or re.sub(r"[^A-Za-z0-9_-]", "_", kind)[:64]

    async def spawn_child(run_context: RunContext[Any], **args: Any) -> Any:
        journal = _journal.get()
        if journal is None:
            raise UserError(f"tool {tool_name!r} spawns a child run: run the agent inside"
                            " runq.agents.pydantic_ai.durable(ctx)")
        if parameters is None and not isinstance(args.get("prompt"), str):
            raise ModelRetry("Give the task as `prompt`, a string.")
        key = child_key(journal.seq, run_context.tool_call_id or tool_name)
        child = await journal.ctx.spawn(
            key, kind, to_jsonable_python(args, fallback=str), priority=priority,
            max_attempts=max_attempts, recovery_policy=recovery_policy, timeout=timeout,
            budget=budget)
        raise CallDeferred(metadata={CHILD: {"run_id": child, "key": key, "kind": kind}})

    tool: Tool[Any] = Tool.from_schema(spawn_child, name=tool_name, description=description,
                                       json_schema=schema, takes_ctx=True)
    tool.durable = False  # not a tool call of the journal: the spawn's key is the unit
    return tool


def child_outcome(child: ChildRun) -> Any:
    """What the model is told of an ended child: its result when it
    succeeded, else ToolFailed saying how it ended and that what it did
    before may or may not have taken effect (made from the child's row
    alone, so a later attempt tells the model the same words and the
    request that follows is replayed)."""
    if child.status == "succeeded":
        return child.result
    failure = {k: v for k, v in (child.failure or {}).items() if k not in _BOOKKEEPING}
    how = "was cancelled" if child.status == "cancelled" else "failed"
    text = f"The delegated run {child.run_id} ({child.kind}) {how}"
    if code := failure.pop("code", None):
        text += f": {code}"
    if message := failure.pop("message", None):
        text += f": {message}"
    if failure:
        text += f" ({json.dumps(failure, sort_keys=True, default=str)})"
    return ToolFailed(text + ". It did not finish: whatever it did before it stopped may or may"
                      " not have taken effect.")


async def child_results(ctx: AsyncRunContext,
                        requests: DeferredToolRequests) -> DeferredToolResults | None:
    """The results of the delegation calls among requests (those a
    ``delegate`` tool deferred), to run the agent on with: each child's
    result, or a ToolFailed for a child that failed or was cancelled
    (child_outcome). While any of those children has not ended, waits for
    them instead (ctx.wait_children, the run's last write of this attempt)
    and returns None: the handler then returns, and the run is claimed
    again, resumed, once the last child ends. Other deferred calls
    (approvals, external calls of other tools) get no result here: they
    are the handler's to answer, in the same DeferredToolResults."""
    ours = {call.tool_call_id: requests.metadata[call.tool_call_id][CHILD]
            for call in requests.calls
            if CHILD in requests.metadata.get(call.tool_call_id, {})}
    if not ours:
        return DeferredToolResults()
    children = {child.key: child for child in await ctx.children()}
    ended: dict[str, ChildRun] = {}
    for call_id, named in ours.items():
        child = children.get(named["key"])
        if child is None:
            raise LookupError(f"run {ctx.run_id} has no child {named['key']!r}, which tool call"
                              f" {call_id!r} spawned")
        if child.status not in TERMINAL:
            await ctx.wait_children()
            return None
        ended[call_id] = child
    return DeferredToolResults(calls={call_id: child_outcome(child)
                                      for call_id, child in ended.items()})
