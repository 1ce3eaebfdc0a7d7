import assert from "node:assert/strict";
import { before, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";

import { type ClaimedRun, RunStopped, runWorker } from "../src/index.js";
import { databaseFixture, eventually } from "../testlib/fixture.js";

const db = databaseFixture("fencing");

/** Sweep until the run is requeued (its 1 ms lease has surely expired), then claim it again. */
async function takeOver(runId: bigint, kind: string): Promise<ClaimedRun> {
  await eventually(async () => (await db.client.sweep()).some((a) => a.runId === runId && a.action === "requeued"));
  let claimed: ClaimedRun | undefined;
  await eventually(async () => {
    claimed = (await db.client.claim({ classes: [10], kinds: [kind], lease: 60_000 }))[0];
    return claimed !== undefined;
  });
  return claimed!;
}

describe("fencing", () => {
  before(async () => {
    // the sweep requeues with a backoff: make it short enough to claim again at once
    await db.sql("UPDATE runq.settings SET backoff_base = '1 ms', backoff_cap = '1 ms'");
  });

  it("a stale epoch's heartbeat answers false and logs one run.fenced", async () => {
    const c = db.client;
    const { runId } = await c.submit("acme", "ts.fence");
    const [first] = await c.claim({ classes: [10], kinds: ["ts.fence"], lease: 1 });
    assert.equal(first?.epoch, 1n);
    await sleep(20);
    const second = await takeOver(runId, "ts.fence");
    assert.equal(second.runId, runId);
    assert.equal(second.epoch, 2n);
    assert.equal(second.resumed, true);

    assert.equal(await c.heartbeat(runId, 1n), false);
    assert.equal(await c.heartbeat(runId, 1n), false);
    assert.equal(await c.checkpoint(runId, 1n, { stale: true }), false);
    assert.equal(await c.complete(runId, 1n, { stale: true }), false);
    assert.equal(await c.heartbeat(runId, 2n), true);

    const events = await c.runEvents(runId);
    const fenced = events.filter((e) => e.type === "run.fenced");
    assert.equal(fenced.length, 1);
    assert.equal(fenced[0]!.epoch, 1n);
    const run = await c.getRun(runId);
    assert.equal(run.status, "running");
    assert.equal(run.leaseEpoch, 2n);
    assert.equal(run.result, null);
    assert.equal(await c.complete(runId, 2n, { fresh: true }), true);
  });

  it("the worker loop stops a handler whose run was taken over", async () => {
    const c = db.client;
    const { runId } = await c.submit("acme", "ts.fence.worker");
    const stop = new AbortController();
    let started!: () => void;
    const handlerStarted = new Promise<void>((resolve) => { started = resolve; });
    let seen: unknown;
    let handlerReturned = false;
    const worker = runWorker({
      client: c, classes: [10], kinds: ["ts.fence.worker"], workerId: "ts-stale",
      lease: 1, heartbeatMs: 50, pollMs: 20, signal: stop.signal,
      handler: async (ctx) => {
        started();
        await new Promise((resolve) => ctx.stopped.addEventListener("abort", resolve));
        seen = ctx.stopped.reason;
        // every further write is refused without reaching runq
        await assert.rejects(ctx.checkpoint({ late: true }), RunStopped);
        stop.abort(); // no second claim of this run by the loop, whatever the timing
        handlerReturned = true;
        return { written: "never" };
      },
    });
    await handlerStarted;
    const second = await takeOver(runId, "ts.fence.worker");
    assert.equal(second.epoch, 2n);
    await eventually(async () => handlerReturned);
    stop.abort();
    await worker;

    assert.ok(seen instanceof RunStopped);
    assert.equal(seen.reason, "fenced");
    assert.equal(seen.epoch, 1n);
    const run = await c.getRun(runId);
    assert.equal(run.status, "running");
    assert.equal(run.leaseEpoch, 2n);
    assert.equal(run.result, null);
    const fenced = (await c.runEvents(runId)).filter((e) => e.type === "run.fenced");
    assert.deepEqual(fenced.map((e) => e.epoch), [1n]);
  });
});
