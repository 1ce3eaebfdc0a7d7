import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";

import { runWorker, TimeoutError, Waiter } from "../src/index.js";
import { databaseFixture } from "../testlib/fixture.js";

const db = databaseFixture("waiting");

describe("Waiter", () => {
  it("waitFor answers when the run ends or waits, and times out", async () => {
    const c = db.client;
    const waiter = new Waiter(db.url);
    try {
      const ids: bigint[] = [];
      for (let i = 0; i < 3; i++) ids.push((await c.submit("acme", "ts.wait", { priority: 3 })).runId);
      const claimed = await c.claim({ classes: [3], maxRuns: 3 });
      const epoch = new Map(claimed.map((r) => [r.runId, r.epoch]));
      const waits = ids.map((id) => waiter.waitFor(id, { timeoutMs: 10_000 }));
      await sleep(200);
      const [a, b, d] = ids as [bigint, bigint, bigint];
      assert.equal(await c.complete(a, epoch.get(a)!, { ok: 1 }), true);
      assert.equal(await c.fail(b, epoch.get(b)!, { code: "boom" }), true);
      assert.equal(await c.askUser(d, epoch.get(d)!, { q: "?" }), true);
      assert.deepEqual((await Promise.all(waits)).map((r) => r.status),
        ["succeeded", "failed", "waiting_for_user"]);
      const queued = (await c.submit("acme", "ts.wait", { priority: 4 })).runId;
      await assert.rejects(waiter.waitFor(queued, { timeoutMs: 300 }), TimeoutError);
      assert.equal(waiter.polls, 0);
      const left = await db.sql("SELECT count(*)::int AS n FROM runq.watches");
      assert.equal(left.rows[0].n, 0);
    } finally {
      await waiter.close();
    }
  });

  it("output yields a worker's chunks in order until the run ends", async () => {
    const c = db.client;
    const waiter = new Waiter(db.url);
    const stop = new AbortController();
    try {
      const { runId } = await c.submit("acme", "ts.stream", { priority: 5 });
      const worker = runWorker({
        client: c, classes: [5], kinds: ["ts.stream"], lease: 30_000, pollMs: 20, signal: stop.signal,
        handler: async (ctx) => {
          await sleep(100);
          await ctx.emit("Hel", "lo");
          await sleep(50);
          await ctx.emit({ tool: "search" });
          return { done: true };
        },
      });
      const seen: unknown[] = [];
      for await (const chunk of waiter.output(runId)) seen.push([chunk.seq, chunk.epoch, chunk.chunk]);
      assert.deepEqual(seen, [[1n, 1n, "Hel"], [2n, 1n, "lo"], [3n, 1n, { tool: "search" }]]);
      assert.equal((await c.getRun(runId)).status, "succeeded");
      const rest: unknown[] = [];
      for await (const chunk of waiter.output(runId, { afterSeq: 2n })) rest.push(chunk.chunk);
      assert.deepEqual(rest, [{ tool: "search" }]);
      stop.abort();
      await worker;
    } finally {
      stop.abort();
      await waiter.close();
    }
  });

  it("a wait survives its connection's end", async () => {
    const c = db.client;
    const waiter = new Waiter(db.url, { onError: () => undefined });
    try {
      const { runId } = await c.submit("acme", "ts.drop", { priority: 6 });
      const [run] = await c.claim({ classes: [6] });
      const waiting = waiter.waitFor(runId, { timeoutMs: 10_000 });
      await sleep(200);
      const killed = await db.sql(
        "SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity"
        + " WHERE datname = current_database() AND application_name = 'runq-wait'");
      assert.equal(killed.rows[0].n, 1);
      await sleep(100);
      assert.equal(await c.complete(runId, run!.epoch), true);
      assert.equal((await waiting).status, "succeeded");
      assert.equal(waiter.polls, 0);
    } finally {
      await waiter.close();
    }
  });
});
