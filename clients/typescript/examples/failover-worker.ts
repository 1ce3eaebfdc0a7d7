// The failover rig's TypeScript worker (tests/failover.py spawns it): runWorker
// loops sharing one Client handle runs of kind "rig.steps" while the rig
// terminates backends, restarts the server or promotes a standby, and every
// step runq acknowledged is appended to RIG_LOG as one JSON line, for the rig
// to check against the database afterwards.
//
//   RUNQ_DATABASE_URL=postgresql://u@h1:5432,h2:5433/db?target_session_attrs=read-write \
//   RIG_LOG=/tmp/rig.jsonl node dist/examples/failover-worker.js
//
// Env: RUNQ_DATABASE_URL (may name several hosts), RIG_LOG (appended to),
// RIG_CONCURRENCY (runWorker loops, 4), RIG_LEASE_MS (10000), RIG_CLASSES
// (comma list, "10"), RIG_POLL_MS (100). The worker id, which is also the
// connections' application_name, is ts:<pid>. It prints "ready" once its
// loops run; SIGTERM or SIGINT stops them (2 s of grace, then the runs in
// flight are released) and it exits 0. An uncaught exception or unhandled
// rejection exits 70: the rig counts that as a crash. Errors the loops or
// the pool report are printed to stderr, timestamped, and end nothing.
//
// RIG_LOG's lines: {"t": seconds, "worker", "op", "run_id", "epoch", ...}, op
// one of started, usage (step, ours), uncertain (call_id), tool_started,
// effect, tool_finished (call_id), checkpoint (step), succeeded, failed.

import { appendFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";

import { Client, persist, runWorker, type RunContext } from "../src/index.js";

const workerId = `ts:${process.pid}`;

const stamp = (): string => new Date().toISOString();

/** One line: name, message, code. */
function describe(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const code = (error as { code?: unknown }).code;
  return `${error.name}: ${error.message}${typeof code === "string" ? ` [${code}]` : ""}`;
}

function crash(error: unknown): never {
  console.error(`${stamp()} ${workerId} crashed:`, error);
  process.exit(70);
}
process.on("uncaughtException", crash);
process.on("unhandledRejection", crash);

function usage(message: string): never {
  console.error(`failover-worker: ${message}`);
  process.exit(2);
}

function setting(name: string, fallback?: string): string {
  const value = process.env[name];
  if (value !== undefined && value !== "") return value;
  if (fallback === undefined) usage(`set ${name}`);
  return fallback;
}

function count(name: string, fallback: number): number {
  const value = Number(setting(name, String(fallback)));
  if (!Number.isSafeInteger(value) || value < 1) usage(`${name} must be a positive integer`);
  return value;
}

const url = setting("RUNQ_DATABASE_URL");
const logPath = setting("RIG_LOG");
const concurrency = count("RIG_CONCURRENCY", 4);
const lease = count("RIG_LEASE_MS", 10_000);
const pollMs = count("RIG_POLL_MS", 100);
const classes = setting("RIG_CLASSES", "10").split(",").map((c) => Number(c.trim()));
if (!classes.every((c) => Number.isInteger(c))) usage("RIG_CLASSES must be a comma list of integers");

/** Appends one acknowledgement; synchronously, so that a crash loses none
 * written before it. */
function ack(op: string, runId: bigint, epoch: bigint, fields: Record<string, unknown> = {}): void {
  const line = { t: Date.now() / 1000, worker: workerId, op, run_id: String(runId), epoch: String(epoch), ...fields };
  appendFileSync(logPath, `${JSON.stringify(line)}\n`);
}

const client = Client.connect(url, { application_name: workerId, max: Math.max(10, 2 * concurrency) }, {
  onError: (error) => console.error(`${stamp()} ${workerId} connection: ${describe(error)}`),
});

/** payload {steps, pause_ms}: each step a turn, its usage, one
 * non-idempotent tool call, a pause and a checkpoint (the Python rig's
 * handler does the same). */
async function rigSteps(ctx: RunContext): Promise<unknown> {
  const steps = Number(ctx.payload.steps);
  const pauseMs = Number(ctx.payload.pause_ms ?? 0);
  const note = (op: string, fields?: Record<string, unknown>): void => ack(op, ctx.runId, ctx.epoch, fields);
  note("started"); // the claim, acknowledged: the rig looks for its run.claimed
  // call_id -> status, of the attempts before this one.
  const calls = new Map<string, string>();
  if (ctx.run.attempt > 1) {
    for (const call of await persist(lease, () => client.toolCalls(ctx.runId))) calls.set(call.callId, call.status);
  }
  let step = (ctx.run.checkpoint as { step?: number } | null)?.step ?? 0;
  const uncertain: string[] = [];
  while (step < steps) {
    await ctx.beginTurn();
    const ours = await ctx.recordUsage({ tokens: 1 });
    note("usage", { step, ours });
    const callId = `effect-${step}`;
    const status = calls.get(callId);
    if (status === "finished") {
      // its effect happened and was recorded: not again
    } else if (status === "uncertain") {
      uncertain.push(callId);
      note("uncertain", { call_id: callId });
    } else {
      await ctx.beginTool(callId, "effect", "non_idempotent", { step });
      note("tool_started", { call_id: callId });
      note("effect", { call_id: callId }); // the tool's body: the external side effect
      await ctx.endTool(callId, { step });
      note("tool_finished", { call_id: callId });
    }
    await sleep(pauseMs);
    await ctx.checkpoint({ step: step + 1 });
    note("checkpoint", { step: step + 1 });
    step += 1;
  }
  return { steps, uncertain };
}

async function main(): Promise<void> {
  const stop = new AbortController();
  const loops = Array.from({ length: concurrency }, () => runWorker({
    client, classes, kinds: ["rig.steps"], workerId, handler: rigSteps, lease, pollMs, graceMs: 2000,
    signal: stop.signal,
    onError: (error) => console.error(`${stamp()} ${workerId} worker: ${describe(error)}`),
    onFinished: (runId, epoch, status) => ack(status, runId, epoch),
  }));
  const shutdown = (): void => stop.abort();
  process.on("SIGTERM", shutdown);
  process.on("SIGINT", shutdown);
  console.log("ready");
  await Promise.all(loops);
  await client.close();
  process.exit(0);
}

main().catch(crash);
