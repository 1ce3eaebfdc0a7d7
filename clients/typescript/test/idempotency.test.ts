import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { IdempotencyConflict, RunqError } from "../src/index.js";
import { databaseFixture } from "../testlib/fixture.js";

const db = databaseFixture("idempotency");

describe("idempotency", () => {
  it("same key, same request: the same run, outcome duplicate", async () => {
    const c = db.client;
    const request = { payload: { order: 7 }, idempotencyKey: "key-1", principalId: "u1" };
    const first = await c.submit("acme", "ts.idem", request);
    const again = await c.submit("acme", "ts.idem", request);
    assert.equal(first.outcome, "created");
    assert.equal(again.outcome, "duplicate");
    assert.equal(again.runId, first.runId);
    const events = await c.runEvents(first.runId);
    assert.deepEqual(events.map((e) => e.type), ["run.created"]);
  });

  it("same key, different request: IdempotencyConflict (RQ001)", async () => {
    const c = db.client;
    await c.submit("acme", "ts.idem", { payload: { order: 1 }, idempotencyKey: "key-2" });
    await assert.rejects(
      c.submit("acme", "ts.idem", { payload: { order: 2 }, idempotencyKey: "key-2" }),
      (error: unknown) => {
        assert.ok(error instanceof IdempotencyConflict);
        assert.ok(error instanceof RunqError);
        assert.equal(error.sqlstate, "RQ001");
        assert.equal(error.name, "IdempotencyConflict");
        assert.match(error.message, /key-2/);
        return true;
      },
    );
  });
});
