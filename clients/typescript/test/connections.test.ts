// Lost connections: a backend terminated under the client (a server restart,
// a failover, pg_terminate_backend) is an error the client logs or a call
// rejects with, never an uncaught exception that ends the process.

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";

import pg from "pg";

import { Client, isConnectionLost, type Queryable, runWorker, type WorkerOptions } from "../src/index.js";
import { newPool } from "../testlib/db.js";
import { databaseFixture, eventually } from "../testlib/fixture.js";
import { Proxy, serverOf, withHosts } from "../testlib/proxy.js";

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

type Finished = [runId: bigint, epoch: bigint, status: string];

/** A Client whose calls named in `lose` reach runq and commit, then throw
 * the error pg throws for a connection lost before the answer came: once
 * each, or on every call with `always` (without reaching runq then). */
class LosesAnswers extends Client {
  readonly lose: Map<string, "once" | "always">;
  readonly calls = new Map<string, number>();

  constructor(db: Queryable, lose: Record<string, "once" | "always">) {
    super(db);
    this.lose = new Map(Object.entries(lose));
  }

  async #lost<T>(name: string, call: () => Promise<T>): Promise<T> {
    this.calls.set(name, (this.calls.get(name) ?? 0) + 1);
    const how = this.lose.get(name);
    if (how === "always") throw new Error("Connection terminated unexpectedly");
    const answer = await call();
    if (how === "once") {
      this.lose.delete(name);
      throw new Error("Connection terminated unexpectedly");
    }
    return answer;
  }

  override completeAndClaim(...a: Parameters<Client["completeAndClaim"]>) {
    return this.#lost("completeAndClaim", () => super.completeAndClaim(...a));
  }
  override fail(...a: Parameters<Client["fail"]>) { return this.#lost("fail", () => super.fail(...a)); }
  override endTool(...a: Parameters<Client["endTool"]>) { return this.#lost("endTool", () => super.endTool(...a)); }
  override recordUsage(...a: Parameters<Client["recordUsage"]>) {
    return this.#lost("recordUsage", () => super.recordUsage(...a));
  }
  override emit(...a: Parameters<Client["emit"]>) { return this.#lost("emit", () => super.emit(...a)); }
  override askUser(...a: Parameters<Client["askUser"]>) { return this.#lost("askUser", () => super.askUser(...a)); }
  override checkpoint(...a: Parameters<Client["checkpoint"]>) {
    return this.#lost("checkpoint", () => super.checkpoint(...a));
  }
}

/** Runs `kind` with `handler` on `client` until `until` holds for the run; what onFinished and onError got. */
async function work(client: Client, kind: string, runId: bigint, handler: WorkerOptions["handler"],
  until: (status: string) => boolean, extra: Partial<WorkerOptions> = {}
): Promise<{ finished: Finished[]; reported: unknown[] }> {
  const finished: Finished[] = [];
  const reported: unknown[] = [];
  const stop = new AbortController();
  const worker = runWorker({
    client, classes: [10], kinds: [kind], lease: 30_000, heartbeatMs: 1000, pollMs: 20, signal: stop.signal,
    onError: (e) => reported.push(e), onFinished: (...a) => finished.push(a), handler, ...extra,
  });
  try {
    await eventually(async () => until((await db.client.getRun(runId)).status));
  } finally {
    stop.abort();
    await worker;
  }
  return { finished, reported };
}

async function eventTypes(runId: bigint): Promise<string[]> {
  return (await db.client.runEvents(runId)).map((e) => e.type);
}

describe("writes sent again on a lost connection", () => {
  let pool: pg.Pool | undefined;
  before(() => { pool = newPool({ connectionString: db.url, max: 4 }); });
  after(async () => { await pool?.end(); });

  it("a run whose backends are terminated over and over succeeds once, under epoch 1", async () => {
    const app = "runq-ts-terminated-often";
    const steps = 8;
    const c = Client.connect(db.url, { application_name: app, max: 4 }, { onError: () => undefined });
    const uncaught: unknown[] = [];
    const record = (error: unknown): void => { uncaught.push(error); };
    process.on("uncaughtException", record);
    const { runId } = await db.client.submit("acme", "ts.conn.often");
    let killed = 0;
    let killing = true;
    // From the handler's start on: a claim that committed but lost its
    // answer would leave its run to the lease's expiry.
    let begin = (): void => undefined;
    const begun = new Promise<void>((resolve) => { begin = resolve; });
    const killer = (async () => {
      await begun;
      while (killing) {
        killed += await terminate(app);
        await sleep(15);
      }
    })();
    let result: { finished: Finished[]; reported: unknown[] };
    try {
      result = await work(c, "ts.conn.often", runId, async (ctx) => {
        begin();
        for (let step = 0; step < steps; step++) {
          await sleep(10);
          await ctx.beginTurn();
          await ctx.recordUsage({ tokens: 1 });
          await ctx.beginTool(`call-${step}`, "effect", "non_idempotent", { step });
          await ctx.endTool(`call-${step}`, { step });
          await ctx.emit({ step });
          await ctx.checkpoint({ step: step + 1 });
        }
        return { steps };
      }, (status) => status !== "queued" && status !== "running", { heartbeatMs: 20 });
    } finally {
      killing = false;
      await killer;
      await c.close();
      process.off("uncaughtException", record);
    }
    const run = await db.client.getRun(runId);
    assert.equal(run.status, "succeeded", JSON.stringify(run.failure));
    assert.equal(run.attempts, 1);
    assert.equal(run.leaseEpoch, 1n);
    assert.deepEqual(run.usage, { tokens: String(steps) }); // no usage counted twice
    const types = await eventTypes(runId);
    assert.ok(!types.includes("run.requeued") && !types.includes("run.fenced"), types.join(" "));
    const calls = await db.client.toolCalls(runId);
    assert.equal(calls.length, steps);
    assert.ok(calls.every((t) => t.status === "finished" && t.epoch === 1n));
    assert.deepEqual((await db.client.readOutput(runId)).map((o) => o.chunk),
      Array.from({ length: steps }, (_, step) => ({ step }))); // no chunk twice
    assert.deepEqual(result.finished, [[runId, 1n, "succeeded"]]);
    assert.ok(killed > 0);
    assert.ok(result.reported.length > 0, "no call lost its connection: nothing was sent again");
    assert.ok(result.reported.every(isConnectionLost), String(result.reported.find((e) => !isConnectionLost(e))));
    assert.deepEqual(uncaught, []);
  });

  /** A run of `steps` steps on a worker over `url`; `meanwhile` runs once its handler has begun. */
  async function through(url: string, kind: string, meanwhile: () => Promise<void>
  ): Promise<{ runId: bigint; finished: Finished[]; reported: unknown[] }> {
    const c = Client.connect(url, { max: 4 }, { onError: () => undefined });
    const { runId } = await db.client.submit("acme", kind);
    let begin = (): void => undefined;
    const begun = new Promise<void>((resolve) => { begin = resolve; });
    const switching = begun.then(meanwhile);
    try {
      const result = await work(c, kind, runId, async (ctx) => {
        begin();
        for (let step = 0; step < 10; step++) {
          await ctx.beginTool(`call-${step}`, "effect", "non_idempotent");
          await ctx.endTool(`call-${step}`, { step });
          await ctx.checkpoint({ step: step + 1 });
          await sleep(50);
        }
        return "done";
      }, (status) => status !== "queued" && status !== "running", { heartbeatMs: 50 });
      await switching;
      return { runId, ...result };
    } finally {
      await c.close();
    }
  }

  async function assertOnce(runId: bigint, finished: Finished[]): Promise<void> {
    const run = await db.client.getRun(runId);
    assert.equal(run.status, "succeeded", JSON.stringify(run.failure));
    assert.equal(run.attempts, 1);
    const types = await eventTypes(runId);
    assert.ok(!types.includes("run.requeued") && !types.includes("run.fenced"), types.join(" "));
    assert.deepEqual(finished, [[runId, 1n, "succeeded"]]);
  }

  it("a run goes on through a server restart", async () => {
    const server = new Proxy(serverOf(db.url));
    await server.start();
    try {
      const { runId, finished, reported } = await through(withHosts(db.url, [server.host]), "ts.conn.restart",
        async () => {
          await sleep(100);
          await server.stop(); // its sessions cut, its port refusing
          await sleep(500);
          await server.start();
        });
      await assertOnce(runId, finished);
      assert.ok(reported.some((e) => (e as { code?: unknown }).code === "ECONNREFUSED"), String(reported));
    } finally {
      await server.stop();
    }
  });

  it("a run goes on through a failover to a promoted standby (read-write)", async () => {
    const primary = new Proxy(serverOf(db.url));
    const standby = new Proxy(serverOf(db.url), { readOnly: true });
    await primary.start();
    await standby.start();
    try {
      const url = withHosts(db.url, [primary.host, standby.host], "?target_session_attrs=read-write");
      let promoted = 0;
      const { runId, finished, reported } = await through(url, "ts.conn.failover", async () => {
        await sleep(100);
        await primary.stop(); // the primary is lost: no writable host until the promotion
        await sleep(500);
        standby.readOnly = false;
        promoted = standby.sessions;
      });
      await assertOnce(runId, finished);
      assert.ok(reported.some((e) => (e as { code?: unknown }).code === "08001"), String(reported));
      assert.ok(promoted > 0 && standby.sessions > promoted); // tried while read-only, then used
    } finally {
      await primary.stop();
      await standby.stop();
    }
  });

  it("calls that committed but lost their answer are settled by asking, not sent again", async () => {
    const c = new LosesAnswers(pool!, { endTool: "once", recordUsage: "once", emit: "once", completeAndClaim: "once" });
    const { runId } = await db.client.submit("acme", "ts.conn.landed");
    const { finished } = await work(c, "ts.conn.landed", runId, async (ctx) => {
      await ctx.beginTool("call-1", "effect", "non_idempotent");
      await ctx.endTool("call-1", { ok: true }); // sent again: RQ004
      assert.equal(await ctx.recordUsage({ tokens: 2, cost_usd: "0.50" }), true); // sent again: counted twice
      assert.equal(await ctx.recordUsage({ cost_usd: "0.5", tokens: 2 }), true);
      await ctx.emit("chunk"); // sent again: stored twice
      return "done"; // completeAndClaim sent again: fenced
    }, (status) => status === "succeeded");
    assert.deepEqual([...c.lose.keys()], []); // each lost its answer once
    const run = await db.client.getRun(runId);
    assert.deepEqual(run.usage, { tokens: "4", cost_usd: "1.00" });
    assert.deepEqual(run.result, "done");
    assert.deepEqual((await db.client.readOutput(runId)).map((o) => o.chunk), ["chunk"]);
    assert.ok(!(await eventTypes(runId)).includes("run.fenced"));
    assert.deepEqual(finished, [[runId, 1n, "succeeded"]]);
    // the others were asked about, not sent again
    assert.deepEqual(Object.fromEntries(c.calls), { endTool: 1, recordUsage: 2, emit: 1, completeAndClaim: 1 });
  });

  it("a fail or an ask_user that committed but lost its answer is not sent again", async () => {
    const c = new LosesAnswers(pool!, { fail: "once", askUser: "once" });
    const failing = (await db.client.submit("acme", "ts.conn.fail")).runId;
    const failed = await work(c, "ts.conn.fail", failing, () => {
      throw Object.assign(new Error("the tool is down"), { code: "tool_down" });
    }, (status) => status === "failed");
    assert.equal((await db.client.getRun(failing)).failure?.code, "tool_down");
    assert.ok(!(await eventTypes(failing)).includes("run.fenced"));
    assert.deepEqual(failed.finished, [[failing, 1n, "failed"]]);

    const asking = (await db.client.submit("acme", "ts.conn.ask", { sessionId: "s-conn-ask" })).runId;
    let asked: unknown = "not yet";
    const parked = await work(c, "ts.conn.ask", asking, async (ctx) => {
      asked = await ctx.askUser("which colour?").then(() => "asked", (e: unknown) => e);
    }, (status) => status === "waiting_for_user");
    await eventually(async () => asked !== "not yet");
    assert.equal(asked, "asked");
    assert.ok(!(await eventTypes(asking)).includes("run.fenced"));
    assert.deepEqual(parked.finished, []);
    assert.deepEqual(Object.fromEntries(c.calls), { fail: 1, askUser: 1 });
  });

  it("a write is sent again for a lease at most, a statement's error not at all", async () => {
    const c = new LosesAnswers(pool!, { checkpoint: "always" });
    const { runId } = await db.client.submit("acme", "ts.conn.out");
    let took = 0;
    let statement: unknown;
    await work(c, "ts.conn.out", runId, async (ctx) => {
      await ctx.beginTool("call-1", "effect", "idempotent");
      await ctx.endTool("call-1", {});
      statement = await ctx.endTool("call-1", {}).catch((e: unknown) => e); // RQ004: not the connection
      const started = Date.now();
      try {
        await ctx.checkpoint({ step: 1 });
      } finally {
        took = Date.now() - started;
      }
    }, (status) => status === "failed", { lease: 400 });
    assert.equal((statement as { sqlstate?: unknown }).sqlstate, "RQ004");
    assert.equal(c.calls.get("endTool"), 2); // the second once: its error is the statement's
    assert.ok(took >= 400, `gave up after ${took} ms`);
    assert.ok((c.calls.get("checkpoint") ?? 0) > 2);
    const run = await db.client.getRun(runId);
    assert.equal(run.failure?.message, "Connection terminated unexpectedly");
  });
});
