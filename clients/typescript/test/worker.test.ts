import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { runWorker } from "../src/index.js";
import { databaseFixture, eventually } from "../testlib/fixture.js";

const db = databaseFixture("worker");

describe("runWorker", () => {
  it("processes 5 runs, each once, and exits when signalled", async () => {
    const c = db.client;
    const ids: bigint[] = [];
    for (let n = 1; n <= 5; n++) ids.push((await c.submit("acme", "ts.work", { payload: { n } })).runId);
    const calls = new Map<bigint, number>();
    const stop = new AbortController();
    const worker = runWorker({
      client: c, classes: [10], kinds: ["ts.work"], workerId: "ts-loop",
      lease: 30_000, heartbeatMs: 100, pollMs: 20, signal: stop.signal,
      handler: async (ctx) => {
        calls.set(ctx.runId, (calls.get(ctx.runId) ?? 0) + 1);
        await ctx.beginTurn();
        await ctx.recordUsage({ output_tokens: 10 });
        await ctx.checkpoint({ turn: 1 });
        return { doubled: (ctx.payload.n as number) * 2 };
      },
    });
    await eventually(async () => {
      const runs = await Promise.all(ids.map((id) => c.getRun(id)));
      return runs.every((r) => r.status === "succeeded");
    });
    stop.abort();
    await worker; // resolves: the loop ended on the signal

    for (const [i, id] of ids.entries()) {
      const run = await c.getRun(id);
      assert.deepEqual(run.result, { doubled: (i + 1) * 2 });
      assert.equal(run.attempts, 1);
      assert.deepEqual(run.usage, { output_tokens: "10" });
      assert.equal(calls.get(id), 1);
      const types = (await c.runEvents(id)).map((e) => e.type);
      assert.deepEqual(types, [
        "run.created", "run.claimed", "run.turn_started", "run.usage", "run.checkpointed", "run.succeeded",
      ]);
    }
    assert.equal(calls.size, 5);
    // Each run after the first was claimed by the completion of the one
    // before it (runq.complete_and_claim: one transaction, so one xmin).
    const handedOn = await db.sql(`
      SELECT count(*)::int AS n FROM runq.run_events AS c
        JOIN runq.run_events AS s ON s.xmin = c.xmin AND s.run_id <> c.run_id
       WHERE c.run_id = ANY ($1) AND c.type = 'run.claimed'
         AND s.run_id = ANY ($1) AND s.type = 'run.succeeded'`, [ids.map(String)]);
    assert.equal(handedOn.rows[0].n, 4);
  });

  it("a handler that throws fails the run with its code and message", async () => {
    const c = db.client;
    const { runId } = await c.submit("acme", "ts.work.fail");
    const stop = new AbortController();
    const worker = runWorker({
      client: c, classes: [10], kinds: ["ts.work.fail"], lease: 30_000, pollMs: 20, signal: stop.signal,
      handler: () => {
        throw Object.assign(new Error("the tool is down"), { code: "tool_unavailable" });
      },
    });
    await eventually(async () => (await c.getRun(runId)).status === "failed");
    stop.abort();
    await worker;
    const run = await c.getRun(runId);
    assert.equal(run.failure?.code, "tool_unavailable");
    assert.equal(run.failure?.message, "the tool is down");
  });

  it("askUser parks the run; the handler's result is not written", async () => {
    const c = db.client;
    const { runId } = await c.submit("acme", "ts.work.ask", { sessionId: "s-work-ask" });
    const stop = new AbortController();
    let answered: unknown;
    const worker = runWorker({
      client: c, classes: [10], kinds: ["ts.work.ask"], lease: 30_000, pollMs: 20, signal: stop.signal,
      handler: async (ctx) => {
        if (ctx.run.inputs.length === 0) {
          await ctx.askUser({ text: "which colour?" });
          return "ignored";
        }
        answered = ctx.run.inputs[0];
        return { colour: answered };
      },
    });
    await eventually(async () => (await c.getRun(runId)).status === "waiting_for_user");
    assert.equal(await c.deliverInput(runId, "blue"), true);
    await eventually(async () => (await c.getRun(runId)).status === "succeeded");
    stop.abort();
    await worker;
    assert.equal(answered, "blue");
    assert.deepEqual((await c.getRun(runId)).result, { colour: "blue" });
  });

  it("cancel while running stops the handler with reason cancelled", async () => {
    const c = db.client;
    const { runId } = await c.submit("acme", "ts.work.cancel");
    const stop = new AbortController();
    let reason: unknown;
    const worker = runWorker({
      client: c, classes: [10], kinds: ["ts.work.cancel"], lease: 30_000, heartbeatMs: 30, pollMs: 20, signal: stop.signal,
      handler: async (ctx) => {
        await new Promise((resolve) => ctx.stopped.addEventListener("abort", resolve));
        reason = (ctx.stopped.reason as { reason?: unknown }).reason;
      },
    });
    await eventually(async () => (await c.getRun(runId)).status === "running");
    assert.equal(await c.cancel(runId), "cancel_requested");
    await eventually(async () => reason !== undefined);
    stop.abort();
    await worker;
    assert.equal(reason, "cancelled");
    assert.equal((await c.getRun(runId)).status, "cancelled");
  });

  it("a shutdown past the grace releases the run in flight", async () => {
    const c = db.client;
    const { runId } = await c.submit("acme", "ts.work.shutdown");
    const stop = new AbortController();
    let reason: unknown;
    const worker = runWorker({
      client: c, classes: [10], kinds: ["ts.work.shutdown"], lease: 30_000, pollMs: 20, graceMs: 50, signal: stop.signal,
      handler: async (ctx) => {
        await new Promise((resolve) => ctx.stopped.addEventListener("abort", resolve));
        reason = (ctx.stopped.reason as { reason?: unknown }).reason;
        return "not written";
      },
    });
    await eventually(async () => (await c.getRun(runId)).status === "running");
    stop.abort();
    await worker;
    assert.equal(reason, "shutdown");
    const run = await c.getRun(runId);
    assert.equal(run.status, "queued"); // released: claimable again at once
    assert.equal(run.attempts, 0); // a release gives back its claim's attempt
    assert.equal(run.result, null);
  });
});
