import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { InvalidArgument } from "../src/index.js";
import { databaseFixture } from "../testlib/fixture.js";

const db = databaseFixture("batched");

describe("batched worker calls", () => {
  it("completeAndClaim completes, then claims, in one call", async () => {
    const c = db.client;
    const ids: bigint[] = [];
    for (let i = 0; i < 3; i++) ids.push((await c.submit("acme", "ts.cac", { payload: { i } })).runId);
    const none = await c.completeAndClaim(null, null, null, { classes: [10], kinds: ["ts.cac"] });
    assert.equal(none.completed, null);
    assert.deepEqual(none.runs.map((r) => r.runId), [ids[0]]);
    const [first] = none.runs as [typeof none.runs[0]];
    assert.equal(first.epoch, 1n);
    assert.deepEqual(first.payload, { i: 0 });

    const next = await c.completeAndClaim(first.runId, first.epoch, { n: 1 },
      { classes: [10], kinds: ["ts.cac"], maxRuns: 2, workerId: "w" });
    assert.equal(next.completed, true);
    assert.deepEqual(next.runs.map((r) => r.runId), [ids[1], ids[2]]);
    assert.deepEqual((await c.getRun(first.runId)).result, { n: 1 });

    // fenced (an epoch the run never had): nothing claimed unless asked
    const [b] = next.runs as [typeof next.runs[0]];
    const fenced = await c.completeAndClaim(b.runId, 7n, null, { classes: [10], kinds: ["ts.cac"] });
    assert.deepEqual(fenced, { completed: false, runs: [] });
    assert.equal((await c.getRun(b.runId)).status, "running");
  });

  it("heartbeatMany and completeMany answer per run", async () => {
    const c = db.client;
    const ids: bigint[] = [];
    for (let i = 0; i < 3; i++) ids.push((await c.submit("acme", "ts.batch", { payload: { i } })).runId);
    const claimed = await c.claim({ classes: [10], kinds: ["ts.batch"], maxRuns: 3 });
    assert.deepEqual(claimed.map((r) => r.runId).sort(), [...ids].sort());
    const [a, b, stale] = claimed as [typeof claimed[0], typeof claimed[0], typeof claimed[0]];

    // an epoch the run never had is answered as a stale one: false
    const alive = await c.heartbeatMany([
      { runId: a.runId, epoch: a.epoch }, { runId: b.runId, epoch: b.epoch }, { runId: stale.runId, epoch: 5n },
    ]);
    assert.deepEqual(alive, new Map([[a.runId, true], [b.runId, true], [stale.runId, false]]));

    const completed = await c.completeMany([
      { runId: a.runId, epoch: a.epoch, result: { n: 1 } },
      { runId: b.runId, epoch: b.epoch },
      { runId: stale.runId, epoch: 5n, result: { n: 3 } },
    ]);
    assert.deepEqual(completed, new Map([[a.runId, true], [b.runId, true], [stale.runId, false]]));

    assert.deepEqual((await c.getRun(a.runId)).result, { n: 1 });
    assert.equal((await c.getRun(b.runId)).status, "succeeded");
    assert.equal((await c.getRun(b.runId)).result, null);
    const s = await c.getRun(stale.runId);
    assert.equal(s.status, "running");
    assert.equal(s.leaseEpoch, 1n);
    // nothing changed; runq logs no run.fenced for an epoch the run never had (the contract: at most one)
    assert.deepEqual((await c.runEvents(stale.runId)).map((e) => e.type), ["run.created", "run.claimed"]);
  });

  it("a repeated run id is InvalidArgument", async () => {
    const c = db.client;
    const { runId } = await c.submit("acme", "ts.batch.dup");
    const [run] = await c.claim({ classes: [10], kinds: ["ts.batch.dup"] });
    await assert.rejects(
      c.heartbeatMany([{ runId, epoch: run!.epoch }, { runId, epoch: run!.epoch }]), InvalidArgument);
  });
});
