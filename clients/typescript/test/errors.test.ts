import assert from "node:assert/strict";
import { after, describe, it } from "node:test";

import pg from "pg";

import {
  Client, InvalidArgument, InvalidRunState, isConnectionLost, PermissionDenied, RunNotFound, RunqError, RunStopped,
  SessionBusy,
} from "../src/index.js";
import { connectClient } from "../testlib/db.js";
import { databaseFixture } from "../testlib/fixture.js";

const db = databaseFixture("errors");

function rejectsWith(cls: new (...args: never[]) => RunqError, sqlstate: string) {
  return (error: unknown): boolean => {
    assert.ok(error instanceof cls, `expected ${cls.name}, got ${String(error)}`);
    assert.equal(error.sqlstate, sqlstate);
    assert.ok(error.cause !== undefined);
    return true;
  };
}

describe("errors", () => {
  it("RunNotFound (RQ003) for a run that does not exist, worker calls included", async () => {
    const c = db.client;
    await assert.rejects(c.getRun(987654321n), rejectsWith(RunNotFound, "RQ003"));
    await assert.rejects(c.runEvents(987654321n), rejectsWith(RunNotFound, "RQ003"));
    await assert.rejects(c.heartbeat(987654321n, 1n), rejectsWith(RunNotFound, "RQ003"));
    await assert.rejects(c.heartbeatMany([{ runId: 987654321n, epoch: 1n }]), rejectsWith(RunNotFound, "RQ003"));
  });

  it("InvalidArgument (22023) for bad arguments", async () => {
    const c = db.client;
    await assert.rejects(c.claim({ classes: [] }), rejectsWith(InvalidArgument, "22023"));
    await assert.rejects(c.claim({ classes: [10], maxRuns: 0 }), rejectsWith(InvalidArgument, "22023"));
    await assert.rejects(c.claim({ classes: [10], kinds: [] }), rejectsWith(InvalidArgument, "22023"));
    await assert.rejects(c.submit("acme", "ts.err", { recoveryPolicy: "sometimes" as "resume" }),
      rejectsWith(InvalidArgument, "22023"));
    await assert.rejects(c.submit("acme", "ts.err", { priority: 40_000 }), rejectsWith(InvalidArgument, "22023"));
    const { runId } = await c.submit("acme", "ts.err", { sessionId: "s-err" });
    const [run] = await c.claim({ classes: [10], kinds: ["ts.err"] });
    assert.equal(run?.runId, runId);
    await assert.rejects(c.endTool(runId, run.epoch, "never-begun", {}), rejectsWith(InvalidArgument, "22023"));
    await assert.rejects(c.beginTool(runId, run.epoch, "c1", "t", "sometimes" as "read_only"),
      rejectsWith(InvalidArgument, "22023"));
    await assert.rejects(c.recordUsage(runId, 7n, { tokens: 1 }), rejectsWith(InvalidArgument, "22023"));
    await assert.rejects(c.recordUsage(runId, run.epoch, { tokens: "lots" }), rejectsWith(InvalidArgument, "22023"));
  });

  it("SessionBusy (RQ002) and InvalidRunState (RQ004)", async () => {
    const c = db.client;
    const { runId } = await c.submit("acme", "ts.busy", { sessionId: "s-busy" });
    await assert.rejects(c.submit("acme", "ts.busy", { sessionId: "s-busy" }), (error: unknown) => {
      rejectsWith(SessionBusy, "RQ002")(error);
      assert.match((error as SessionBusy).detail ?? "", new RegExp(String(runId)));
      return true;
    });
    await assert.rejects(c.deliverInput(runId, { text: "hi" }), rejectsWith(InvalidRunState, "RQ004"));
  });

  describe("PermissionDenied (42501)", () => {
    const role = `runq_ts_nobody_${process.pid}`;
    after(async () => { await db.sql(`DROP ROLE IF EXISTS ${role}`); });

    it("a role without runq's grants", async () => {
      await db.sql(`CREATE ROLE ${role} NOLOGIN`);
      const conn = await connectClient(db.url);
      try {
        await conn.query(`SET ROLE ${role}`);
        await assert.rejects(new Client(conn).getRun(1n), rejectsWith(PermissionDenied, "42501"));
      } finally {
        await conn.end();
      }
    });
  });

  it("errors that are not runq's pass through unchanged", async () => {
    const conn = await connectClient(db.url);
    try {
      await conn.query("BEGIN");
      await conn.query("SELECT 1/0").catch(() => undefined);
      // the transaction is aborted: 25P02 is no runq SQLSTATE
      await assert.rejects(new Client(conn).getRun(1n), (error: unknown) => {
        assert.ok(!(error instanceof RunqError));
        assert.equal((error as { code?: string }).code, "25P02");
        return true;
      });
    } finally {
      await conn.end();
    }
  });

  it("isConnectionLost: the connection's errors, not the statement's", async () => {
    const coded = (code: string, message = code): Error => Object.assign(new Error(message), { code });
    for (const lost of [
      coded("57P01", "terminating connection due to administrator command"), coded("57P02"), coded("57P03"),
      coded("08006"), coded("08001"), coded("25006"), coded("ECONNREFUSED"), coded("ECONNRESET"),
      new Error("Connection terminated unexpectedly"), new Error("Connection terminated"),
      new Error("Client has encountered a connection error and is not queryable"),
      new Error("timeout exceeded when trying to connect"), new Error("timeout expired"),
    ]) assert.equal(isConnectionLost(lost), true, String(lost));
    for (const statement of [
      coded("22023"), coded("40001"), coded("42501"), coded("RQ004"), coded("25P02"),
      new InvalidRunState("call is finished"), new RunStopped(1n, 1n, "fenced"),
      new TypeError("Do not know how to serialize a BigInt"),
      new Error("Cannot use a pool after calling end on the pool"),
      new Error("circular reference detected while preparing \"x\" for query"),
      new RangeError("Connection terminated? no: not pg's"), "Connection terminated", undefined,
      new Error("Query read timeout"), // the statement may still commit
    ]) assert.equal(isConnectionLost(statement), false, String(statement));
    // and a real one: a call on a connection whose backend was terminated
    const conn = new pg.Client({ connectionString: db.url });
    conn.on("error", () => undefined); // expected: not logged
    await conn.connect();
    try {
      const pid = (await conn.query("SELECT pg_backend_pid() AS pid")).rows[0].pid as number;
      const ended = new Promise((resolve) => conn.once("end", resolve));
      await db.sql("SELECT pg_terminate_backend($1)", [pid]);
      await ended;
      const error = await new Client(conn).getRun(1n).catch((e: unknown) => e);
      assert.ok(error instanceof Error && isConnectionLost(error), String(error));
    } finally {
      await conn.end();
    }
  });
});
