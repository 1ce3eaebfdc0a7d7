#!/usr/bin/env python3
"""A chat turn on runq: the web handler submits the turn in the interactive
class, the browser gets the agent's output as it is written (server-sent
events from runq's output stream) and the answer the moment it exists.

    python examples/chat/app.py [--database-url URL] [--port 8765]

then open http://127.0.0.1:8765/. One process serves the page on localhost
and runs a worker pool whose "agent" (AGENT below: a stand-in for a model
call) writes its answer a word at a time with ctx.emit. Needs runq deployed
in the database (sql/runq.sql) and the dashboard extra (Starlette, uvicorn).

The three routes:
  GET  /                       the page
  POST /turns                  {"text": ...} -> {"run_id": N}: runq.submit, class 0
  GET  /turns/N/events         text/event-stream: an `output` event per chunk
                               (id: its seq, so that a browser that reconnects
                               resumes after Last-Event-ID), then one `end`
                               event with the run's status and result
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from runq import AsyncClient
from runq.pool import AsyncRunContext, Slot, WorkerPool

INTERACTIVE = 0  # the priority class of a user waiting on a turn

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>runq chat</title></head>
<body>
<form id="ask"><input id="text" name="text" autocomplete="off" autofocus>
<button>Ask</button></form>
<p id="answer"></p>
<p id="status"></p>
<script>
document.getElementById("ask").addEventListener("submit", async (event) => {
  event.preventDefault();
  const answer = document.getElementById("answer");
  const status = document.getElementById("status");
  answer.textContent = ""; status.textContent = "submitted";
  const response = await fetch("/turns", {method: "POST",
    headers: {"Content-Type": "application/json"},
    body: JSON.stringify({text: document.getElementById("text").value})});
  const {run_id} = await response.json();
  const events = new EventSource(`/turns/${run_id}/events`);
  let epoch = null;
  events.addEventListener("output", (e) => {
    const chunk = JSON.parse(e.data);
    // A new epoch: the run started over from its checkpoint; drop the old try.
    if (epoch !== null && chunk.epoch !== epoch) answer.textContent = "";
    epoch = chunk.epoch;
    answer.textContent += chunk.chunk;
    status.textContent = "writing";
  });
  events.addEventListener("end", (e) => {
    const run = JSON.parse(e.data);
    status.textContent = run.status;
    answer.dataset.result = JSON.stringify(run.result);
    events.close();
  });
});
</script>
</body></html>"""


async def agent(ctx: AsyncRunContext) -> dict[str, Any]:
    """Stands in for a model: answers word by word, as tokens come."""
    text = str(ctx.run.payload.get("text", ""))
    words = f"You said: {text}. runq streamed this answer to you word by word.".split(" ")
    for i, word in enumerate(words):
        await ctx.emit(word if i == 0 else " " + word)
        await asyncio.sleep(0.05)
    return {"answer": " ".join(words), "words": len(words)}


def create_app(database_url: str) -> Starlette:
    client = AsyncClient.connect(database_url)

    async def page(request: Request) -> Response:
        return HTMLResponse(PAGE)

    async def turn(request: Request) -> Response:
        body = await request.json()
        submitted = await client.submit("chat-example", "chat.turn", {"text": str(body["text"])},
                                        priority=INTERACTIVE)
        return JSONResponse({"run_id": submitted.run_id})

    async def events(request: Request) -> Response:
        run_id = int(request.path_params["run_id"])
        after = int(request.headers.get("last-event-id", "0") or 0)

        async def stream() -> AsyncIterator[str]:
            async for chunk in client.stream(run_id, after_seq=after):
                data = json.dumps({"seq": chunk.seq, "epoch": chunk.epoch, "chunk": chunk.chunk})
                yield f"id: {chunk.seq}\nevent: output\ndata: {data}\n\n"
            run = await client.get_run(run_id)
            end = json.dumps({"status": run.status, "result": run.result})
            yield f"event: end\ndata: {end}\n\n"

        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-store"})

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with client:
            yield

    return Starlette(routes=[Route("/", page), Route("/turns", turn, methods=["POST"]),
                             Route("/turns/{run_id:int}/events", events)],
                     lifespan=lifespan)


def worker(database_url: str) -> WorkerPool:
    """The agent's pool: two places for interactive turns only."""
    return WorkerPool(database_url, {"chat.turn": agent}, [Slot((INTERACTIVE,), 2)],
                      lease=timedelta(seconds=30), poll_interval=1.0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--database-url", default=os.environ.get("RUNQ_DATABASE_URL"))
    ap.add_argument("--port", type=int, default=8765)
    args = ap.parse_args()
    if not args.database_url:
        ap.error("no database: pass --database-url or set RUNQ_DATABASE_URL")
    pool = worker(args.database_url)
    pool.start()
    try:
        uvicorn.run(create_app(args.database_url), host="127.0.0.1", port=args.port)
    finally:
        pool.stop()
        pool.join()


if __name__ == "__main__":
    main()
