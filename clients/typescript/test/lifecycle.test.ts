import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { databaseFixture } from "../testlib/fixture.js";

const db = databaseFixture("lifecycle");

describe("lifecycle", () => {
  it("submit, claim, heartbeat, checkpoint, turn, tool, usage, complete", async () => {
    const c = db.client;
    const submitted = await c.submit("acme", "ts.lifecycle", {
      payload: { prompt: "hi" }, sessionId: "s-life", priority: 0, budget: { cost_usd: "2.00" },
    });
    assert.equal(submitted.outcome, "created");
    assert.equal(typeof submitted.runId, "bigint");

    const claimed = await c.claim({ classes: [0, 10], workerId: "ts-1", lease: 30_000, kinds: ["ts.lifecycle"] });
    assert.equal(claimed.length, 1);
    const run = claimed[0]!;
    assert.equal(run.runId, submitted.runId);
    assert.equal(run.epoch, 1n);
    assert.equal(run.attempt, 1);
    assert.deepEqual(run.payload, { prompt: "hi" });
    assert.deepEqual(run.inputs, []);
    assert.deepEqual(run.budget, { cost_usd: "2.00" });

    assert.equal(await c.heartbeat(run.runId, run.epoch), true);
    assert.equal(await c.checkpoint(run.runId, run.epoch, { step: 1 }), true);
    assert.equal(await c.beginTurn(run.runId, run.epoch), true);
    assert.equal(await c.beginTool(run.runId, run.epoch, "call-1", "search", "read_only", { q: "x" }), true);
    assert.equal(await c.endTool(run.runId, run.epoch, "call-1", { hits: 3 }), true);
    assert.equal(await c.recordUsage(run.runId, run.epoch, { cost_usd: "0.0123", input_tokens: 1200 }), true);
    assert.equal(await c.recordUsage(run.runId, run.epoch, { cost_usd: 0.0177, input_tokens: 10n }), true);
    assert.equal(await c.complete(run.runId, run.epoch, { answer: 42 }), true);

    const done = await c.getRun(run.runId);
    assert.equal(done.status, "succeeded");
    assert.deepEqual(done.result, { answer: 42 });
    assert.equal(done.leaseEpoch, 1n);
    assert.ok(done.finishedAt instanceof Date);
    // exact sums, digit for digit, as the SQL's numeric adds them
    assert.deepEqual(done.usage, { cost_usd: "0.0300", input_tokens: "1210" });

    const events = await c.runEvents(run.runId);
    assert.deepEqual(events.map((e) => e.type), [
      "run.created", "run.claimed", "run.checkpointed", "run.turn_started",
      "run.tool_started", "run.tool_finished", "run.usage", "run.usage", "run.succeeded",
    ]);
    assert.deepEqual(events.map((e) => e.epoch), [0n, 1n, 1n, 1n, 1n, 1n, 1n, 1n, 1n]);

    const calls = await c.toolCalls(run.runId);
    assert.equal(calls.length, 1);
    assert.equal(calls[0]!.status, "finished");
    assert.deepEqual(calls[0]!.outcome, { hits: 3 });
    assert.deepEqual(calls[0]!.args, { q: "x" });
  });

  it("cancel: at once when queued, by flag when running", async () => {
    const c = db.client;
    const queued = await c.submit("acme", "ts.cancel", { sessionId: "s-cancel-1" });
    assert.equal(await c.cancel(queued.runId, "changed my mind"), "cancelled");
    assert.equal(await c.cancel(queued.runId), "already_terminal");

    const running = await c.submit("acme", "ts.cancel", { sessionId: "s-cancel-2" });
    const [run] = await c.claim({ classes: [10], kinds: ["ts.cancel"] });
    assert.equal(run?.runId, running.runId);
    assert.equal(await c.cancel(running.runId), "cancel_requested");
    assert.equal(await c.heartbeat(run.runId, run.epoch), false);
    assert.equal((await c.getRun(running.runId)).status, "cancelled");
  });
});
