"""The runq side of a durable agent loop, for any framework: each model
request and each tool call of a run is a unit that takes effect once.

A model request is numbered (1, 2, 3, ...) in the order the loop gets its
responses (a request that raised, and is sent again, keeps its number).
One agent run at a time in a journal: two runs at once (agents called from
parallel tools) would interleave their numbers in no fixed order.
Given the same responses, an agent's loop sends the same requests in the
same order, so request n of a later attempt is request n of an earlier one;
a hash of the request checks it. The request is then

* replayed, when an earlier attempt journaled it (runq.model_calls, the rows
  whose writer held the run): no gate, no turn, no spend, and its text is
  emitted again under the new epoch, so a reader that starts over on an
  epoch change still shows the whole answer;
* refused, when the hash differs (the agent's code or prompt changed
  between attempts): the run fails with ``replay_diverged``. Running it
  afresh would hand the model a history whose tool calls it never made, and
  could make it call a non-idempotent tool a second time under a new id;
* else gated (runq.begin_turn: budget, deadline, cancel; a refusal raises
  RunStopped before anything is sent), sent, and journaled with its usage
  in one transaction (runq.record_model_call). A crash before that commits
  loses the response and its usage record: the request is sent again.

A tool call begins (runq.begin_tool, with the tool's idempotency class),
runs and ends (runq.end_tool). On a later attempt a finished call returns
its recorded outcome, a retryable one runs again, and one whose outcome is
unknown (uncertain: a non_idempotent call cut off before its end) is not run
again: the loop tells the model UNKNOWN_OUTCOME, neither success nor
failure. Not running it again is this module's policy, read from
runq.tool_calls before begin_tool.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable, Mapping
from decimal import Decimal
from typing import Any

from runq.errors import RunStopped
from runq.types import ModelCall, ToolCall
from runq.worker.context import AsyncRunContext, RunContext

UNKNOWN_OUTCOME = (
    "The outcome of this tool call is unknown: an earlier execution was interrupted after it"
    " started and before its result was recorded, so it may or may not have taken effect. Do not"
    " assume it succeeded or failed; check before doing it again.")

IDEMPOTENCY = ("read_only", "idempotent", "non_idempotent")


def request_hash(request: Any) -> str:
    """sha256 of a request's JSON form (keys sorted)."""
    text = json.dumps(request, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


class Journal:
    """The units of one attempt at a run (one handler call), on its context.
    What earlier attempts journaled is read once, at the first unit, and only
    when there were earlier attempts (the epoch is above 1)."""

    def __init__(self, ctx: AsyncRunContext) -> None:
        if isinstance(ctx, RunContext):
            raise TypeError("an agent runs in an async handler: its journal needs the"
                            " AsyncRunContext, not a RunContext")
        self.ctx = ctx
        self.seq = 0           # model requests of this attempt answered so far
        self.replayed = 0      # ... of them answered from the journal
        self.sent = 0          # ... of them sent to the model
        self._models: dict[int, ModelCall] | None = None
        self._tools: dict[str, ToolCall] | None = None

    async def _earlier(self) -> tuple[dict[int, ModelCall], dict[str, ToolCall]]:
        if self._models is None or self._tools is None:
            if self.ctx.epoch > 1:
                self._models = {m.seq: m for m in await self.ctx.model_calls() if m.applied}
                self._tools = {t.call_id: t for t in await self.ctx.tool_calls()}
            else:
                self._models, self._tools = {}, {}
        return self._models, self._tools

    async def model_request(self, digest: str,
                            send: Callable[[], Awaitable[tuple[Any, Mapping[str, Decimal] | None]]],
                            replayed: Callable[[Any], Awaitable[None]] | None = None) -> Any:
        """The response to the loop's next model request, whose hash is
        digest: replayed, or sent by ``send`` (returning the response as
        JSON and its usage) after the gate and journaled. ``replayed`` is
        called with a replayed response (to emit its text again)."""
        models, _ = await self._earlier()
        # A request is numbered once it has a response: one that raised (and
        # that the loop may send again) takes no number.
        seq = self.seq + 1
        earlier = models.get(seq)
        if earlier is not None:
            if earlier.request_hash != digest:
                await self.ctx.fail(
                    "replay_diverged",
                    f"model request {seq} differs from the one an earlier attempt sent"
                    " (the agent's code or prompt changed): its response is not replayed",
                    seq=seq, journaled_epoch=earlier.epoch)
                raise RunStopped(f"run {self.ctx.run_id}: model request {seq} diverged",
                                 "finished")
            self.seq = seq
            self.replayed += 1
            if replayed is not None:
                await replayed(earlier.response)
            return earlier.response
        await self.ctx.begin_turn()
        response, usage = await send()
        self.seq = seq
        self.sent += 1
        if not await self.ctx.record_model_call(seq, digest, response, usage):
            raise RunStopped(f"run {self.ctx.run_id} is no longer ours", "fenced")
        return response

    async def tool_call(self, call_id: str, tool: str, idempotency: str, args: Mapping[str, Any],
                        run: Callable[[], Awaitable[Any]], unknown: Callable[[], Any]) -> Any:
        """The outcome (JSON) of tool call call_id: recorded, run now by
        ``run`` between begin_tool and end_tool, or ``unknown()`` for a call
        whose earlier execution has no recorded outcome."""
        if idempotency not in IDEMPOTENCY:
            raise ValueError(f"idempotency must be one of {', '.join(IDEMPOTENCY)}:"
                             f" {idempotency!r}")
        _, tools = await self._earlier()
        earlier = tools.get(call_id)
        if earlier is not None and earlier.status == "finished":
            return earlier.outcome
        if earlier is not None and earlier.status != "retryable":
            return unknown()  # uncertain, or left started by an attempt that ended
        await self.ctx.begin_tool(call_id, tool, idempotency, args)
        outcome = await run()
        await self.ctx.end_tool(call_id, outcome)
        return outcome
