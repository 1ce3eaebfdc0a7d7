#!/usr/bin/env python3
"""Durable agents: what RunqDurability adds per model request and per tool
call (round trips and time), against the same agent without it, and the
bytes a long conversation's journal writes.

    bench/agents.py                              200 runs of each variant, 5 requests each
    bench/agents.py --runs 20 --reps 2 --turns 10   a smoke run

A database of its own (runq_agents_<pid>, dropped at the end), with
track_functions = 'all' (pg_stat_user_functions counts each runq function
the server runs). One process: the pool runs in it, one run at a time
(Slot((10,), 1)), its handlers async. The agent is a pydantic-ai Agent whose
model is a FunctionModel answering at once, in two shapes, each defined once
and built twice: plain (agent.run) and durable
(capabilities=[RunqDurability(emit_text=False)], run inside durable(ctx)):

* requests: --requests model requests, no tool: an output validator refuses
  (ModelRetry) every answer but the last;
* tools: --requests model requests, each but the last calling one tool (a
  read_only one and a non_idempotent one in turn), that returns at once.

The four variants run in --reps batches each, interleaved (the order turns
each rep), --runs / --reps runs a batch, each batch on a pool of its own
that is stopped before the next: its connections closed, their function
counts are in pg_stat_user_functions. Time: the handler's agent.run (with
durable(ctx)), per run, median of a batch; the overhead is with less
without, per rep, median over reps (and the reps' range). Per model request:
the requests shape's overhead / --requests; per tool call: the tools
shape's overhead less the requests shape's, / (--requests - 1). Round trips:
the calls of runq.begin_turn, record_model_call, begin_tool, end_tool,
model_calls and tool_calls per run, as counted.

Bytes: one durable run of --turns model requests, each response ~200
characters of text and (but the last) a tool call. Reported: the journal's
rows (runq.model_calls and runq.tool_calls: pg_column_size, and the
relations' growth), against what a checkpoint per request of the whole
history would have written (the JSON of the run's messages up to each
response, ModelMessagesTypeAdapter.dump_json, summed).

Uses RUNQ_DATABASE_URL, or starts the throwaway cluster with scripts/pg.
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import string
import time
from collections.abc import Awaitable, Callable

import psycopg
from pydantic_ai import Agent, ModelRetry
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelResponse,
    ModelResponsePart,
    TextPart,
    ToolCallPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import UsageLimits
from run import scratch_database  # bench/run.py, beside this file

from runq import Client
from runq.agents.pydantic_ai import RunqDurability, durable
from runq.pool import AsyncRunContext, Slot, WorkerPool

FUNCTIONS = ("begin_turn", "record_model_call", "begin_tool", "end_tool", "model_calls",
             "tool_calls")
UNLIMITED = UsageLimits(request_limit=None)
Handler = Callable[[AsyncRunContext], Awaitable[None]]


def filler(step: int, size: int) -> str:
    return "".join(random.Random(step).choices(string.ascii_lowercase + " ", k=size))


def make_agent(requests: int, tools: bool, text: int, journaled: bool) -> Agent[None, str]:
    def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        step = 1 + sum(isinstance(m, ModelResponse) for m in messages)
        last = step >= requests
        parts: list[ModelResponsePart] = []
        if tools and not last:
            if text:
                parts.append(TextPart(filler(step, text)))
            parts.append(ToolCallPart("look" if step % 2 else "note", {"n": step},
                                      tool_call_id=f"c{step}"))
        else:
            parts.append(TextPart(("final " if last else "draft ") + filler(step, text)))
        return ModelResponse(parts=parts, model_name="scripted")

    agent: Agent[None, str] = Agent(
        FunctionModel(script, model_name="scripted"), name="bench", retries=requests,
        capabilities=[RunqDurability(emit_text=False)] if journaled else [])

    @agent.tool_plain(metadata={"runq": {"idempotency": "read_only"}})
    def look(n: int) -> str:
        return f"seen {n}"

    @agent.tool_plain  # non_idempotent: the default
    def note(n: int) -> str:
        return f"noted {n}"

    @agent.output_validator
    def final(output: str) -> str:
        if not output.startswith("final"):
            raise ModelRetry("not the final answer yet")
        return output

    return agent


def handler(agent: Agent[None, str], journaled: bool, took: list[float],
            histories: dict[int, list[ModelMessage]]) -> Handler:
    async def run(ctx: AsyncRunContext) -> None:
        start = time.perf_counter()
        if journaled:
            with durable(ctx):
                result = await agent.run("go", usage_limits=UNLIMITED)
        else:
            result = await agent.run("go", usage_limits=UNLIMITED)
        took.append(time.perf_counter() - start)
        histories[ctx.run_id] = result.all_messages()
        await ctx.complete({"answer": result.output[:20]})
    return run


def counts(url: str) -> dict[str, int]:
    """Function calls so far, once the other backends of the database have
    exited (a backend's counts reach the server's when it ends, at the latest)."""
    with psycopg.connect(url, autocommit=True) as conn:
        for _ in range(100):
            [(others,)] = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname ="
                                       " current_database() AND pid <> pg_backend_pid()"
                                       ).fetchall()
            if others == 0:
                break
            time.sleep(0.1)
        rows = conn.execute("SELECT funcname, sum(calls) FROM pg_stat_user_functions"
                            " WHERE schemaname = 'runq' GROUP BY 1").fetchall()
    return {name: int(n) for name, n in rows}


def drive(url: str, handlers: dict[str, Handler], ids: list[int]) -> None:
    """A pool of their own runs runs ids, one at a time; stopped once they
    are all over (read from runq.runs: no runq function is called to wait)."""
    pool = WorkerPool(url, handlers, [Slot((10,), 1)], poll_interval=0.2, sweep_interval=None,
                      tick_interval=None)
    pool.start()
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            while True:
                ended: dict[str, int] = dict(conn.execute(
                    "SELECT status, count(*) FROM runq.runs WHERE run_id = ANY(%s)"
                    " AND status NOT IN ('queued', 'running') GROUP BY 1", [ids]).fetchall())
                if sum(ended.values()) == len(ids):
                    break
                time.sleep(0.05)
        assert ended == {"succeeded": len(ids)}, ended
    finally:
        pool.stop()
        pool.join()


def batch(url: str, handlers: dict[str, Handler], kind: str, runs: int) -> dict[str, int]:
    """runs runs of kind: the function calls they made."""
    with Client.connect(url) as c:
        ids = [c.submit("bench", kind, priority=10).run_id for _ in range(runs)]
    before = counts(url)
    drive(url, handlers, ids)
    after = counts(url)
    return {f: after.get(f, 0) - before.get(f, 0) for f in after}


def overhead(args: argparse.Namespace, url: str) -> list[str]:
    k: int = args.requests
    took: dict[str, list[float]] = {}
    histories: dict[int, list[ModelMessage]] = {}
    handlers: dict[str, Handler] = {}
    for shape in ("requests", "tools"):
        for journaled in (False, True):
            kind = f"{shape}.{'durable' if journaled else 'plain'}"
            took[kind] = []
            handlers[kind] = handler(make_agent(k, shape == "tools", 0, journaled), journaled,
                                     took[kind], histories)
    kinds = list(handlers)
    medians: dict[str, list[float]] = {kind: [] for kind in kinds}
    calls: dict[str, dict[str, int]] = {kind: {} for kind in kinds}
    per_batch = max(1, args.runs // args.reps)
    for rep in range(args.reps):
        for kind in kinds[rep % 4:] + kinds[:rep % 4]:
            took[kind].clear()
            for f, n in batch(url, handlers, kind, per_batch).items():
                calls[kind][f] = calls[kind].get(f, 0) + n
            medians[kind].append(statistics.median(took[kind]))
    runs: int = per_batch * args.reps
    added = {shape: [(d - p) * 1000 for d, p in zip(medians[f"{shape}.durable"],
                                                   medians[f"{shape}.plain"], strict=True)]
             for shape in ("requests", "tools")}
    per_request = [a / k for a in added["requests"]]
    per_tool = [(t - r) / (k - 1) for t, r in zip(added["tools"], added["requests"], strict=True)]

    def ms(values: list[float]) -> str:
        return (f"{statistics.median(values):.2f} ms ({min(values):.2f} to "
                f"{max(values):.2f})")

    def per_run(kind: str, *functions: str) -> float:
        names = functions or tuple(calls[kind])
        return sum(calls[kind].get(f, 0) for f in names) / runs

    req, tools = "requests.durable", "tools.durable"
    lines = [f"| runs per variant, model requests per run (tools: one per request but the "
             f"last) | {runs:,} in {args.reps} batches, {k} |"]
    for shape in ("requests", "tools"):
        plain, dur = (statistics.median(medians[f"{shape}.{v}"]) * 1000
                      for v in ("plain", "durable"))
        lines.append(f"| {shape} shape: agent.run per run, without / with, median | "
                     f"{plain:.2f} / {dur:.2f} ms |")
    lines += [
        f"| added per model request (median of reps, range) | {ms(per_request)} |",
        f"| added per tool call (median of reps, range) | {ms(per_tool)} |",
        (f"| calls per model request: begin_turn + record_model_call | "
         f"{per_run(req, 'begin_turn') / k:g} + {per_run(req, 'record_model_call') / k:g} |"),
        (f"| calls per tool call: begin_tool + end_tool | "
         f"{per_run(tools, 'begin_tool') / (k - 1):g} + "
         f"{per_run(tools, 'end_tool') / (k - 1):g} |"),
        (f"| reads per run on a first attempt: model_calls + tool_calls | "
         f"{per_run(req, 'model_calls', 'tool_calls'):g} (requests), "
         f"{per_run(tools, 'model_calls', 'tool_calls'):g} (tools) |"),
        (f"| those six functions' calls per run without the capability | "
         f"{per_run('requests.plain', *FUNCTIONS):g} (requests), "
         f"{per_run('tools.plain', *FUNCTIONS):g} (tools) |"),
        (f"| every runq function's calls per run (nested included), without / with | "
         f"{per_run('requests.plain'):g} / {per_run(req):g} (requests), "
         f"{per_run('tools.plain'):g} / {per_run(tools):g} (tools) |")]
    return lines


def conversation(args: argparse.Namespace, url: str) -> list[str]:
    took: list[float] = []
    histories: dict[int, list[ModelMessage]] = {}
    kind = "conversation"
    handlers = {kind: handler(make_agent(args.turns, True, 200, True), True, took, histories)}
    size = ("SELECT pg_total_relation_size('runq.model_calls'),"
            " pg_total_relation_size('runq.tool_calls')")
    with psycopg.connect(url, autocommit=True) as conn:
        [sizes0] = conn.execute(size).fetchall()
        with Client.connect(url) as c:
            run_id = c.submit("bench", kind, priority=10).run_id
        drive(url, handlers, [run_id])
        [sizes1] = conn.execute(size).fetchall()
        [(rows, row_bytes, json_bytes)] = conn.execute(
            "SELECT count(*), sum(pg_column_size(m.*)), sum(octet_length(response::text))"
            " FROM runq.model_calls AS m WHERE run_id = %s", [run_id]).fetchall()
        [(tools, tool_bytes)] = conn.execute(
            "SELECT count(*), sum(pg_column_size(t.*)) FROM runq.tool_calls AS t"
            " WHERE run_id = %s", [run_id]).fetchall()
    messages = histories[run_id]
    ends = [i + 1 for i, m in enumerate(messages) if isinstance(m, ModelResponse)]
    checkpoints = sum(len(ModelMessagesTypeAdapter.dump_json(messages[:end])) for end in ends)
    grown = sizes1[0] - sizes0[0] + sizes1[1] - sizes0[1]
    return [f"| conversation: model requests, tool calls (one durable run) | {rows}, {tools} |",
            (f"| journal rows written: model_calls + tool_calls (pg_column_size) | "
             f"{row_bytes + tool_bytes:,} B ({row_bytes:,} + {tool_bytes:,}) |"),
            f"| ... the responses' JSON alone | {json_bytes:,} B |",
            f"| ... the two tables' growth (pg_total_relation_size) | {grown:,} B |",
            (f"| a checkpoint per request of the whole history (JSON, summed) | "
             f"{checkpoints:,} B |"),
            (f"| ... the last of them (the whole history once) | "
             f"{len(ModelMessagesTypeAdapter.dump_json(messages)):,} B |")]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=200, help="runs of each variant, in all")
    ap.add_argument("--reps", type=int, default=5, help="interleaved batches of each variant")
    ap.add_argument("--requests", type=int, default=5, help="model requests per run")
    ap.add_argument("--turns", type=int, default=100,
                    help="model requests of the conversation whose bytes are measured")
    args = ap.parse_args()
    if args.requests < 2:
        ap.error("--requests must be 2 or more (the tools shape calls a tool in all but the last)")
    with scratch_database("runq_agents", "track_functions = 'all'") as (url, version):
        lines = ["| measure | value |", "| --- | ---: |"]
        lines += overhead(args, url)
        lines += conversation(args, url)
    print(f"PostgreSQL {version}, {os.cpu_count()} cores, "
          f"{time.strftime('%Y-%m-%d')}\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
