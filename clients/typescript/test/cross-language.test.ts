import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, it } from "node:test";
import { promisify } from "node:util";

import { databaseFixture } from "../testlib/fixture.js";

const db = databaseFixture("xlang");
const run = promisify(execFile);
const PYTHON = process.env.RUNQ_PYTHON
  ?? fileURLToPath(new URL("../../../../.venv/bin/python", import.meta.url));

/** Run a Python snippet with `url` bound to the test database; its stdout parsed as JSON. */
async function python(code: string, args: string[] = []): Promise<unknown> {
  const script = `import json, os, sys\nimport runq\nurl = os.environ["RUNQ_TS_URL"]\n${code}`;
  const { stdout } = await run(PYTHON, ["-c", script, ...args], {
    env: { ...process.env, RUNQ_TS_URL: db.url },
  });
  return JSON.parse(stdout);
}

describe("cross-language", () => {
  it("submitted from Python, completed from TypeScript", async () => {
    const submitted = await python(`
with runq.Client.connect(url) as c:
    s = c.submit("acme", "xlang.py2ts", {"question": "six times seven"}, session_id="s-py")
    print(json.dumps({"run_id": s.run_id, "outcome": s.outcome}))
`) as { run_id: number; outcome: string };
    assert.equal(submitted.outcome, "created");

    const c = db.client;
    const [claimed] = await c.claim({ classes: [10], kinds: ["xlang.py2ts"], workerId: "ts" });
    assert.equal(claimed?.runId, BigInt(submitted.run_id));
    assert.deepEqual(claimed.payload, { question: "six times seven" });
    const result = { answer: 42, by: "typescript", nested: [1, "two", null] };
    assert.equal(await c.complete(claimed.runId, claimed.epoch, result), true);

    const seen = await python(`
with runq.Client.connect(url) as c:
    r = c.get_run(int(sys.argv[1]))
    print(json.dumps({"status": r.status, "result": r.result}))
`, [String(submitted.run_id)]);
    assert.deepEqual(seen, { status: "succeeded", result });
  });

  it("submitted from TypeScript, completed from Python", async () => {
    const c = db.client;
    const { runId } = await c.submit("acme", "xlang.ts2py", {
      payload: { text: "héllo ✓" }, sessionId: "s-ts", budget: { cost_usd: "1.50" },
    });
    const done = await python(`
from decimal import Decimal
with runq.Client.connect(url) as c:
    [r] = c.claim([10], kinds=["xlang.ts2py"], worker_id="py")
    assert r.budget == {"cost_usd": Decimal("1.50")}, r.budget
    assert c.record_usage(r.run_id, r.epoch, {"cost_usd": Decimal("0.25")})
    ok = c.complete(r.run_id, r.epoch, {"echo": r.payload["text"], "by": "python"})
    print(json.dumps({"run_id": r.run_id, "epoch": r.epoch, "ok": ok}))
`) as { run_id: number; epoch: number; ok: boolean };
    assert.deepEqual(done, { run_id: Number(runId), epoch: 1, ok: true });

    const final = await c.getRun(runId);
    assert.equal(final.status, "succeeded");
    assert.deepEqual(final.result, { echo: "héllo ✓", by: "python" });
    assert.deepEqual(final.usage, { cost_usd: "0.25" });
  });
});
