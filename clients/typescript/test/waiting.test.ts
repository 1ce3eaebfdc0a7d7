import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { InvalidRunState } from "../src/index.js";
import { databaseFixture } from "../testlib/fixture.js";

const db = databaseFixture("waiting");

describe("waiting_for_user", () => {
  it("ask_user, deliver_input, claim again with the input, complete", async () => {
    const c = db.client;
    const { runId } = await c.submit("acme", "ts.ask", { sessionId: "s-ask", payload: { task: "book" } });
    const [first] = await c.claim({ classes: [10], kinds: ["ts.ask"] });
    assert.equal(first?.runId, runId);
    assert.equal(await c.checkpoint(runId, first.epoch, { step: "asked" }), true);
    assert.equal(await c.askUser(runId, first.epoch, { text: "which day?" }), true);

    const waiting = await c.getRun(runId);
    assert.equal(waiting.status, "waiting_for_user");
    assert.deepEqual(waiting.question, { text: "which day?" });
    assert.deepEqual(await c.claim({ classes: [10], kinds: ["ts.ask"] }), []);

    assert.equal(await c.deliverInput(runId, { text: "friday" }), true);
    assert.equal((await c.getRun(runId)).status, "queued");
    await assert.rejects(c.deliverInput(runId, { text: "again" }), InvalidRunState);

    const [second] = await c.claim({ classes: [10], kinds: ["ts.ask"] });
    assert.equal(second?.runId, runId);
    assert.equal(second.epoch, 2n);
    assert.equal(second.resumed, true);
    assert.deepEqual(second.checkpoint, { step: "asked" });
    assert.deepEqual(second.inputs, [{ text: "friday" }]);
    assert.equal(await c.complete(runId, second.epoch, { booked: "friday" }), true);

    const done = await c.getRun(runId);
    assert.equal(done.status, "succeeded");
    assert.deepEqual(done.result, { booked: "friday" });
    const types = (await c.runEvents(runId)).map((e) => e.type);
    assert.deepEqual(types, [
      "run.created", "run.claimed", "run.checkpointed", "run.waiting_for_user",
      "run.input_delivered", "run.claimed", "run.succeeded",
    ]);
  });

  it("a submit to a waiting session delivers its payload as input", async () => {
    const c = db.client;
    const { runId } = await c.submit("acme", "ts.ask", { sessionId: "s-ask-2" });
    const [run] = await c.claim({ classes: [10], kinds: ["ts.ask"] });
    assert.equal(await c.askUser(runId, run!.epoch, "ok?"), true);
    const reply = await c.submit("acme", "ts.ask", { sessionId: "s-ask-2", payload: { text: "yes" } });
    assert.deepEqual(reply, { runId, outcome: "input_delivered" });
  });
});
