// The failover rig's worker program (examples/failover-worker.ts) as the rig
// runs it: a subprocess on a multi-host URL, its backends terminated while it
// works, its acknowledgements in RIG_LOG, stopped by SIGTERM.

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";

import { databaseFixture, eventually } from "../testlib/fixture.js";
import { closedPort, withHosts } from "../testlib/proxy.js";

const db = databaseFixture("rigworker");
const PROGRAM = fileURLToPath(new URL("../examples/failover-worker.js", import.meta.url));

interface Ack {
  t: number;
  worker: string;
  op: string;
  run_id: string;
  epoch: string;
  [field: string]: unknown;
}

describe("examples/failover-worker", () => {
  it("works through terminated backends, logs what runq acknowledged, exits 0 on SIGTERM", async () => {
    const dir = await mkdtemp(join(tmpdir(), "runq-rig-"));
    const log = join(dir, "rig.jsonl");
    // The first host answers nothing.
    const url = withHosts(db.url, [`127.0.0.1:${await closedPort()}`, new URL(db.url).host],
      "?target_session_attrs=read-write");
    const child = spawn(process.execPath, [PROGRAM], {
      env: {
        ...process.env, RUNQ_DATABASE_URL: url,
        RIG_LOG: log, RIG_CONCURRENCY: "2", RIG_LEASE_MS: "10000", RIG_CLASSES: "10", RIG_POLL_MS: "50",
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => { stdout += d.toString(); });
    child.stderr.on("data", (d: Buffer) => { stderr += d.toString(); });
    const exited = once(child, "exit") as Promise<[number | null, string | null]>;
    const workerId = `ts:${child.pid}`;
    const ids: bigint[] = [];
    try {
      await eventually(async () => stdout.includes("ready\n") || child.exitCode !== null);
      assert.equal(stdout, "ready\n", stderr);

      const submit = async (): Promise<void> => {
        ids.push((await db.client.submit("acme", "rig.steps", { payload: { steps: 4, pause_ms: 30 } })).runId);
      };
      await submit();
      await submit();
      // Once both loops hold a run, their backends go, again and again;
      // while nothing else is queued: a claim that lost its answer would
      // leave its run to the lease's expiry.
      await eventually(async () => (await db.sql(
        "SELECT count(*)::int AS n FROM runq.runs WHERE status = 'running'")).rows[0].n === 2);
      let killed = 0;
      for (let i = 0; i < 5; i++) {
        killed += (await db.sql(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity
          WHERE datname = current_database() AND application_name = $1`, [workerId])).rowCount ?? 0;
        await sleep(40);
      }
      assert.ok(killed > 0);
      await submit(); // claimed by a completion, or by a claim
      await eventually(async () => (await Promise.all(ids.map((id) => db.client.getRun(id))))
        .every((r) => r.status === "succeeded"), 20_000);
    } finally {
      child.kill("SIGTERM");
    }
    const [code, signal] = await exited;
    assert.equal(signal, null);
    assert.equal(code, 0, stderr);

    const acks = (await readFile(log, "utf8")).trim().split("\n").map((line) => JSON.parse(line) as Ack);
    await rm(dir, { recursive: true });
    assert.ok(acks.every((a) => a.worker === workerId && typeof a.t === "number" && a.epoch === "1"));
    for (const id of ids) {
      const mine = acks.filter((a) => a.run_id === String(id));
      assert.deepEqual(mine.filter((a) => a.op === "started").length, 1);
      assert.deepEqual(mine.filter((a) => a.op === "succeeded").length, 1);
      assert.deepEqual(mine.filter((a) => a.op === "effect").map((a) => a.call_id),
        ["effect-0", "effect-1", "effect-2", "effect-3"]);
      assert.deepEqual(mine.filter((a) => a.op === "checkpoint").map((a) => a.step), [1, 2, 3, 4]);
      assert.deepEqual(mine.filter((a) => a.op === "usage").map((a) => [a.step, a.ours]),
        [[0, true], [1, true], [2, true], [3, true]]);
      const run = await db.client.getRun(id);
      assert.deepEqual(run.result, { steps: 4, uncertain: [] });
      assert.deepEqual(run.usage, { tokens: "4" });
      const types = (await db.client.runEvents(id)).map((e) => e.type);
      assert.ok(!types.includes("run.fenced") && !types.includes("run.requeued"), types.join(" "));
    }
  });
});
