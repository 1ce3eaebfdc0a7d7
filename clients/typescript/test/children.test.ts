import assert from "node:assert/strict";
import { before, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";

import {
  type ChildRun, type ClaimedRun, IdempotencyConflict, InvalidArgument, RunNotFound, RunStopped, runWorker,
} from "../src/index.js";
import { databaseFixture, eventually } from "../testlib/fixture.js";

const db = databaseFixture("children");

/** Claim the one queued run of this kind. */
async function claimOne(kind: string, lease: number = 30_000): Promise<ClaimedRun> {
  const [run] = await db.client.claim({ classes: [10], kinds: [kind], lease });
  assert.ok(run !== undefined, `no ${kind} run to claim`);
  return run;
}

async function eventTypes(runId: bigint): Promise<string[]> {
  return (await db.client.runEvents(runId)).map((e) => e.type);
}

describe("child runs", () => {
  before(async () => {
    // the sweep requeues with a backoff: make it short enough to claim again at once
    await db.sql("UPDATE runq.settings SET backoff_base = '1 ms', backoff_cap = '1 ms'");
  });

  it("a parent spawns two children and waits; its resumed claim reads their results", async () => {
    const c = db.client;
    const { runId: parent } = await c.submit("acme", "ts.parent", { payload: { xs: [1, 2] } });
    const stop = new AbortController();
    const spawned: bigint[] = [];
    const claims: Array<{ resumed: boolean; attempt: number }> = [];
    let seen: ChildRun[] | undefined;
    const parents = runWorker({
      client: c, classes: [10], kinds: ["ts.parent"], workerId: "ts-parent",
      lease: 30_000, pollMs: 20, signal: stop.signal,
      handler: async (ctx) => {
        claims.push({ resumed: ctx.run.resumed, attempt: ctx.run.attempt });
        if (!ctx.run.resumed) {
          for (const [i, x] of (ctx.payload.xs as number[]).entries()) {
            spawned.push(await ctx.spawn(`part-${i}`, "ts.child", { x }));
          }
          await ctx.waitChildren();
          return "not written";
        }
        seen = await ctx.children();
        return { sum: seen.reduce((sum, child) => sum + (child.result as { doubled: number }).doubled, 0) };
      },
    });
    let children: ReturnType<typeof runWorker> | undefined;
    try {
      await eventually(async () => (await c.getRun(parent)).status === "waiting_for_children");
      assert.equal(spawned.length, 2);
      assert.equal(typeof spawned[0], "bigint");
      const waiting = await c.children(parent);
      assert.deepEqual(waiting.map((ch) => [ch.key, ch.runId, ch.kind, ch.status, ch.result, ch.failure]), [
        ["part-0", spawned[0], "ts.child", "queued", null, null],
        ["part-1", spawned[1], "ts.child", "queued", null, null],
      ]);
      const child = await c.getRun(spawned[0]!);
      assert.equal(child.parentRunId, parent);
      assert.equal(child.tenantId, "acme");
      assert.equal((await c.getRun(parent)).parentRunId, null);

      children = runWorker({
        client: c, classes: [10], kinds: ["ts.child"], workerId: "ts-child",
        lease: 30_000, pollMs: 20, signal: stop.signal,
        handler: async (ctx) => {
          const x = ctx.payload.x as number;
          await ctx.recordUsage({ tokens: x });
          return { doubled: x * 2 };
        },
      });
      await eventually(async () => (await c.getRun(parent)).status === "succeeded");
    } finally {
      stop.abort();
      await parents;
      await children;
    }

    assert.deepEqual(claims, [{ resumed: false, attempt: 1 }, { resumed: true, attempt: 1 }]);
    assert.deepEqual(seen?.map((ch) => [ch.key, ch.status, ch.result, ch.usage]), [
      ["part-0", "succeeded", { doubled: 2 }, { tokens: "1" }],
      ["part-1", "succeeded", { doubled: 4 }, { tokens: "2" }],
    ]);
    const done = await c.getRun(parent);
    assert.deepEqual(done.result, { sum: 6 });
    assert.equal(done.attempts, 1); // the requeue by the last child reset them
    assert.deepEqual(done.usage, { tokens: "3" }); // the children's spend rolls up
    assert.deepEqual(await eventTypes(parent), [
      "run.created", "run.claimed", "run.spawned", "run.spawned", "run.waiting_for_children",
      "run.children_done", "run.claimed", "run.succeeded",
    ]);
    const events = await c.runEvents(parent);
    assert.deepEqual(events.filter((e) => e.type === "run.spawned").map((e) => e.payload),
      [{ run_id: Number(spawned[0]), key: "part-0" }, { run_id: Number(spawned[1]), key: "part-1" }]);
    const created = (await c.runEvents(spawned[1]!)).find((e) => e.type === "run.created");
    assert.equal(created?.payload.parent_run_id, Number(parent));
  });

  it("spawn is idempotent by key, across the parent's epochs", async () => {
    const c = db.client;
    const { runId: parent } = await c.submit("acme", "ts.idem.parent");
    const first = await claimOne("ts.idem.parent");
    const a = await c.spawn(parent, first.epoch, "k", "ts.idem.child", { q: 1 });
    assert.equal(typeof a, "bigint");
    assert.equal(await c.spawn(parent, first.epoch, "k", "ts.idem.child", { q: 1 }), a);
    await assert.rejects(c.spawn(parent, first.epoch, "k", "ts.idem.child", { q: 2 }), IdempotencyConflict);
    // a priority given is not the parent's priority left out
    await assert.rejects(c.spawn(parent, first.epoch, "k", "ts.idem.child", { q: 1 }, { priority: 10 }),
      IdempotencyConflict);
    const b = await c.spawn(parent, first.epoch, "k2", "ts.idem.child", undefined,
      { maxAttempts: 1, recoveryPolicy: "fail", timeout: 60_000, budget: { cost_usd: "0.50" }, priority: 3 });
    assert.notEqual(b, a);
    const childB = await c.getRun(b!);
    assert.equal(childB.priority, 3);
    assert.equal(childB.maxAttempts, 1);
    assert.deepEqual(childB.budget, { cost_usd: "0.50" });

    // a resumed attempt spawning again gets the same children
    assert.equal(await c.release(parent, first.epoch), true);
    const second = await claimOne("ts.idem.parent");
    assert.equal(second.epoch, first.epoch + 1n);
    assert.equal(await c.spawn(parent, second.epoch, "k", "ts.idem.child", { q: 1 }), a);
    assert.deepEqual((await c.children(parent)).map((ch) => [ch.key, ch.runId]), [["k", a], ["k2", b]]);
    assert.equal((await eventTypes(parent)).filter((t) => t === "run.spawned").length, 2);

    await assert.rejects(c.spawn(parent, second.epoch, "", "ts.idem.child"), InvalidArgument);
    await assert.rejects(c.children(987654321n), RunNotFound);
  });

  it("a fenced spawn answers null and creates nothing", async () => {
    const c = db.client;
    const { runId: parent } = await c.submit("acme", "ts.fence.parent");
    const stale = await claimOne("ts.fence.parent", 1);
    await sleep(20);
    await eventually(async () => (await c.sweep()).some((a) => a.runId === parent && a.action === "requeued"));
    let fresh: ClaimedRun | undefined;
    await eventually(async () => {
      fresh = (await c.claim({ classes: [10], kinds: ["ts.fence.parent"], lease: 60_000 }))[0];
      return fresh !== undefined;
    });
    assert.equal(fresh!.epoch, stale.epoch + 1n);
    const kept = await c.spawn(parent, fresh!.epoch, "kept", "ts.fence.child");
    assert.equal(typeof kept, "bigint");

    // fencing is decided before the key: null whether or not the key exists
    assert.equal(await c.spawn(parent, stale.epoch, "kept", "ts.fence.child"), null);
    assert.equal(await c.spawn(parent, stale.epoch, "new", "ts.fence.child"), null);
    assert.equal(await c.waitChildren(parent, stale.epoch), false);
    assert.deepEqual((await c.children(parent)).map((ch) => ch.key), ["kept"]);
    const fenced = (await c.runEvents(parent)).filter((e) => e.type === "run.fenced");
    assert.deepEqual(fenced.map((e) => e.epoch), [stale.epoch]);
    assert.equal((await c.getRun(parent)).status, "running");
  });

  it("ctx.spawn on a run cancelled meanwhile throws RunStopped", async () => {
    const c = db.client;
    const { runId } = await c.submit("acme", "ts.spawn.cancel");
    const stop = new AbortController();
    let go!: () => void;
    const cancelled = new Promise<void>((resolve) => { go = resolve; });
    const thrown: unknown[] = [];
    const worker = runWorker({
      client: c, classes: [10], kinds: ["ts.spawn.cancel"], lease: 30_000, pollMs: 20, signal: stop.signal,
      handler: async (ctx) => {
        await cancelled;
        // the first reaches runq, which answers NULL; the later ones are
        // refused without a round trip
        for (const call of [() => ctx.spawn("late", "ts.spawn.child"), () => ctx.spawn("later", "ts.spawn.child"),
          () => ctx.waitChildren()]) {
          await call().then(() => thrown.push("no error"), (error: unknown) => thrown.push(error));
        }
        return "not written";
      },
    });
    try {
      await eventually(async () => (await c.getRun(runId)).status === "running");
      assert.equal(await c.cancel(runId), "cancel_requested");
      go();
      await eventually(async () => thrown.length === 3);
    } finally {
      stop.abort();
      await worker;
    }
    for (const error of thrown) {
      assert.ok(error instanceof RunStopped, String(error));
      assert.equal(error.reason, "cancelled");
    }
    assert.equal(thrown[0], thrown[2]); // the one RunStopped of the run, thrown again
    assert.equal((await c.getRun(runId)).status, "cancelled");
    assert.deepEqual(await c.children(runId), []);
  });

  it("waitChildren with no live child queues the run at once, its attempts kept", async () => {
    const c = db.client;
    const { runId } = await c.submit("acme", "ts.wait.empty");
    const first = await claimOne("ts.wait.empty");
    assert.equal(await c.waitChildren(runId, first.epoch), true);
    const run = await c.getRun(runId);
    assert.equal(run.status, "queued");
    assert.equal(run.attempts, 1);
    const again = await claimOne("ts.wait.empty");
    assert.equal(again.resumed, true);
    assert.equal(again.attempt, 2);
    assert.deepEqual((await eventTypes(runId)).slice(-3), ["run.claimed", "run.children_done", "run.claimed"]);
    assert.equal(await c.complete(runId, again.epoch), true);
  });

  it("a parent that ends cancels its children", async () => {
    const c = db.client;
    const { runId: parent } = await c.submit("acme", "ts.end.parent");
    const p = await claimOne("ts.end.parent");
    const queued = (await c.spawn(parent, p.epoch, "queued", "ts.end.queued"))!;
    const running = (await c.spawn(parent, p.epoch, "running", "ts.end.running"))!;
    const r = await claimOne("ts.end.running");
    assert.equal(r.runId, running);
    assert.equal(await c.fail(parent, p.epoch, { code: "gave_up" }), true);

    assert.equal((await c.getRun(queued)).status, "cancelled");
    assert.equal(await c.heartbeat(running, r.epoch), false); // its cancel flag ends it
    assert.deepEqual((await c.children(parent)).map((ch) => ch.status), ["cancelled", "cancelled"]);
    for (const [child, type] of [[queued, "run.cancelled"], [running, "run.cancel_requested"]] as const) {
      const event = (await c.runEvents(child)).find((e) => e.type === type);
      assert.equal(event?.payload.reason, "parent_finished");
    }
  });
});
