// Lost connections: a backend terminated under the client (a server restart,
// a failover, pg_terminate_backend) is an error the client logs or a call
// rejects with, never an uncaught exception that ends the process.

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import pg from "pg";

import { Client, runWorker } from "../src/index.js";
import { databaseFixture, eventually } from "../testlib/fixture.js";

const db = databaseFixture("conn");

/** Terminates the backends of connections named `app`; how many there were. */
async function terminate(app: string): Promise<number> {
  const { rows } = await db.sql(
    `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
      WHERE datname = current_database() AND application_name = $1 AND pid <> pg_backend_pid()`, [app]);
  return rows.length;
}

describe("lost connections", () => {
  const uncaught: unknown[] = [];
  const record = (error: unknown): void => { uncaught.push(error); };
  before(() => { process.on("uncaughtException", record); });
  after(() => { process.off("uncaughtException", record); });

  it("the worker loop survives its backends being terminated", async () => {
    const app = "runq-ts-terminated-worker";
    const logged: Error[] = [];
    const reported: unknown[] = [];
    const c = Client.connect(db.url, { application_name: app, max: 2 }, { onError: (e) => logged.push(e) });
    const stop = new AbortController();
    let release = (): void => undefined;
    const released = new Promise<void>((resolve) => { release = resolve; });
    try {
      const worker = runWorker({
        client: c, classes: [10], kinds: ["ts.conn"], lease: 30_000, heartbeatMs: 20, pollMs: 20,
        signal: stop.signal, onError: (e) => reported.push(e),
        handler: async (ctx) => {
          if (ctx.payload.wait === true) await released;
          await ctx.checkpoint({ after: "terminate" }); // on a new connection
          return "done";
        },
      });

      // While a run is in flight: its heartbeats lose their connection.
      const first = (await db.client.submit("acme", "ts.conn", { payload: { wait: true } })).runId;
      await eventually(async () => (await db.client.getRun(first)).status === "running");
      assert.ok(await terminate(app) > 0);
      await eventually(async () => logged.length + reported.length > 0);
      release();
      await eventually(async () => (await db.client.getRun(first)).status === "succeeded");

      // While it polls for work: its claims lose their connection.
      const seen = logged.length + reported.length;
      assert.ok(await terminate(app) > 0);
      await eventually(async () => logged.length + reported.length > seen);
      const second = (await db.client.submit("acme", "ts.conn")).runId;
      await eventually(async () => (await db.client.getRun(second)).status === "succeeded");

      stop.abort();
      await worker; // the loop ended on the signal, not on an error
    } finally {
      stop.abort();
      release();
      await c.close();
    }
    assert.deepEqual(uncaught, []);
    for (const error of [...logged, ...reported]) {
      assert.match(String(error), /terminating connection due to administrator command|Connection terminated/);
    }
  });

  it("a Client over a pg.Client logs the lost connection and rejects the next call", async () => {
    const app = "runq-ts-terminated-client";
    // No listener of the test's own: the Client's is the one under test.
    const conn = new pg.Client({ connectionString: db.url, application_name: app });
    await conn.connect();
    const logged: Error[] = [];
    try {
      const c = new Client(conn, { onError: (e) => logged.push(e) });
      const { runId } = await c.submit("acme", "ts.conn.client");
      assert.equal(await terminate(app), 1);
      await eventually(async () => logged.length > 0);
      await assert.rejects(c.getRun(runId), /not queryable|Connection terminated/);
    } finally {
      await conn.end();
    }
    assert.deepEqual(uncaught, []);
    assert.match(String(logged[0]), /terminating connection due to administrator command/);
  });
});
