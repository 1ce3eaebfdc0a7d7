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
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterable, Iterator, Mapping
from contextvars import ContextVar
from decimal import Decimal
from typing import Any

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
from pydantic_ai.tools import AgentDepsT, RunContext
from pydantic_core import to_jsonable_python

from runq.agents.journal import UNKNOWN_OUTCOME, Journal, request_hash
from runq.worker.context import AsyncRunContext

__all__ = ["Prices", "RunqDurability", "durable"]

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


