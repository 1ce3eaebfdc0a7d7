// A minimal worker loop: claim, run a handler, heartbeat, complete or fail.
// It decides nothing the SQL does not: the first worker call that answers
// false stops the run (the handler's `stopped` signal aborts, its context
// throws RunStopped from then on) and the loop writes nothing more for it.

import { setTimeout as sleep } from "node:timers/promises";

import type {
  AmountsInput, ChildRun, ClaimedRun, Client, JsonObject, SpawnOptions, ToolIdempotency,
} from "./client.js";
import { isJsonEncodable } from "./client.js";
import { RunStopped, type StopReason } from "./errors.js";

export interface RunContext {
  readonly runId: bigint;
  readonly epoch: bigint;
  readonly payload: JsonObject;
  /** The claimed row: attempt, checkpoint, inputs, resumed, deadline, budget, usage. */
  readonly run: ClaimedRun;
  /** Aborted (with the RunStopped as its reason) once the run is no longer this worker's. */
  readonly stopped: AbortSignal;
  checkpoint(state: unknown): Promise<void>;
  beginTurn(): Promise<void>;
  /** Append chunks (JSON values) to the run's output, for readers of Waiter.output. */
  emit(...chunks: unknown[]): Promise<void>;
  beginTool(callId: string, tool: string, idempotency: ToolIdempotency, args?: JsonObject): Promise<void>;
  endTool(callId: string, outcome: unknown): Promise<void>;
  /** Sent even once the run is stopped (spend is a fact); false when fenced. */
  recordUsage(usage: AmountsInput): Promise<boolean>;
  /** Park the run until deliverInput; the handler should return, its result is not written. */
  askUser(question: unknown): Promise<void>;
  /** A queued child run of this run, named by key among its children: its
   * run_id. The same key again (a resumed attempt spawning anew) gives the
   * same child; a different request under it throws IdempotencyConflict. */
  spawn(key: string, kind: string, payload?: JsonObject, options?: SpawnOptions): Promise<bigint>;
  /** Park the run until its last child ends; its next claim is a resumed one
   * (read ctx.children() there). The handler should return, its result is not written. */
  waitChildren(): Promise<void>;
  /** This run's children in spawn order: their status, result, failure, usage. */
  children(): Promise<ChildRun[]>;
}

/** Its return value completes the run; a thrown error fails it. */
export type Handler = (ctx: RunContext) => unknown;

export interface WorkerOptions {
  client: Client;
  classes: readonly number[];
  /** Only runs of these kinds (the kinds this handler knows). */
  kinds?: readonly string[];
  workerId?: string;
  handler: Handler;
  /** Defaults to a third of `lease`. */
  heartbeatMs?: number;
  /** Lease per claim, in ms: always sent, so that the heartbeat is timed from
   * the lease the runs really have (the settings' default may be shorter). */
  lease: number;
  /** Stops claiming; an in-flight run gets graceMs to finish, then is released. */
  signal?: AbortSignal;
  /** Pause between claims that found nothing. Default 1000. */
  pollMs?: number;
  /** Default 30 000. */
  graceMs?: number;
  /** Errors that do not end the loop (a claim or heartbeat that did not reach the server). */
  onError?: (error: unknown) => void;
}

/** The failure a thrown error is reported as: its code when it has a string one, else its name. */
function failureOf(error: unknown): { code: string; message: string } {
  if (error instanceof Error) {
    const code = (error as { code?: unknown }).code;
    return { code: typeof code === "string" ? code : error.name, message: error.message };
  }
  return { code: "Error", message: String(error) };
}

/** Why runq refused our epoch, read from the run's row: the rules are the SQL's. */
async function stopReason(client: Client, runId: bigint, epoch: bigint): Promise<StopReason> {
  try {
    const run = await client.getRun(runId);
    if (run.leaseEpoch !== epoch) return "fenced";
    if (run.status === "cancelled") return "cancelled";
    const code = run.failure?.code;
    if (run.status === "failed" && (code === "deadline_exceeded" || code === "budget_exhausted")) return code;
  } catch {
    // the refusal stands; only its reason is unknown
  }
  return "fenced";
}

/** Resolves when `signal` aborts (at once if it has), or when `cancel` does. */
function aborted(signal: AbortSignal, cancel: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted || cancel.aborted) return resolve();
    const done = (): void => {
      signal.removeEventListener("abort", done);
      cancel.removeEventListener("abort", done);
      resolve();
    };
    signal.addEventListener("abort", done);
    cancel.addEventListener("abort", done);
  });
}

async function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  try {
    await sleep(ms, undefined, signal === undefined ? {} : { signal });
  } catch {
    // aborted: the caller checks the signal
  }
}

/** Handles the run; when its completion also claimed the next run (one
 * round trip, one transaction: runq.complete_and_claim), returns that run. */
async function processRun(options: WorkerOptions, run: ClaimedRun, heartbeatMs: number
): Promise<ClaimedRun | undefined> {
  const { client, handler, signal } = options;
  const onError = options.onError ?? ((error: unknown) => console.error("runq worker:", error));
  const { runId, epoch } = run;
  const stopping = new AbortController();
  const done = new AbortController(); // the handler has returned (or was given up on)
  let stop: RunStopped | undefined;
  let parked = false;
  let asking = false; // ask_user or wait_children is on its way: no heartbeat may land after it
  let beat: Promise<unknown> = Promise.resolve();

  const stopWith = async (reason?: StopReason): Promise<RunStopped> => {
    const why = reason ?? (await stopReason(client, runId, epoch));
    if (stop === undefined) {
      stop = new RunStopped(runId, epoch, why);
      stopping.abort(stop);
    }
    return stop;
  };
  // A fenced write is refused without a round trip once the run is stopped.
  const refuse = (): void => {
    if (stop !== undefined) throw stop;
    if (parked) throw new RunStopped(runId, epoch, "finished");
  };
  const write = async (call: () => Promise<boolean>): Promise<void> => {
    refuse();
    if (!(await call())) throw await stopWith();
  };
  // The run ends its lease and waits (ask_user, wait_children): the handler's
  // result is not written after it.
  const park = async (call: () => Promise<boolean>): Promise<void> => {
    // A heartbeat committed after it would be fenced (the run is no longer
    // running) and log a run.fenced that no stale worker caused.
    asking = true;
    await beat.catch(() => undefined);
    try {
      await write(call);
      parked = true;
    } finally {
      asking = false;
    }
  };

  const ctx: RunContext = {
    runId, epoch, run, payload: run.payload, stopped: stopping.signal,
    checkpoint: (state) => write(() => client.checkpoint(runId, epoch, state)),
    beginTurn: () => write(() => client.beginTurn(runId, epoch)),
    emit: (...chunks) => write(() => client.emit(runId, epoch, chunks)),
    beginTool: (callId, tool, idempotency, args) =>
      write(() => client.beginTool(runId, epoch, callId, tool, idempotency, args)),
    endTool: (callId, outcome) => write(() => client.endTool(runId, epoch, callId, outcome)),
    recordUsage: async (usage) => {
      const ok = await client.recordUsage(runId, epoch, usage);
      if (!ok) await stopWith();
      return ok;
    },
    askUser: (question) => park(() => client.askUser(runId, epoch, question)),
    spawn: async (key, kind, payload, options) => {
      refuse();
      const child = await client.spawn(runId, epoch, key, kind, payload, options);
      if (child === null) throw await stopWith(); // fenced, as a write's false
      return child;
    },
    waitChildren: () => park(() => client.waitChildren(runId, epoch)),
    children: () => client.children(runId),
  };

  const beating = (async () => {
    for (;;) {
      await pause(heartbeatMs, done.signal);
      if (done.signal.aborted || stop !== undefined || parked) return;
      if (asking) continue;
      try {
        beat = client.heartbeat(runId, epoch);
        if (!(await beat)) await stopWith();
      } catch (error) {
        onError(error); // the lease decides: the next heartbeat that reaches runq says whether it is still ours
      }
    }
  })();

  type Outcome = { ok: true; value: unknown } | { ok: false; error: unknown };
  const handled: Promise<Outcome> = Promise.resolve()
    .then(() => handler(ctx))
    .then((value) => ({ ok: true as const, value }), (error: unknown) => ({ ok: false as const, error }));
  const shutdown = (async (): Promise<"shutdown" | undefined> => {
    if (signal === undefined) return new Promise<undefined>(() => undefined);
    await aborted(signal, done.signal);
    await pause(options.graceMs ?? 30_000, done.signal);
    return done.signal.aborted ? undefined : "shutdown";
  })();

  const first = await Promise.race([handled, shutdown]);
  done.abort();
  await beating;
  if (first === "shutdown" || first === undefined) {
    // Grace is over: the handler is told to stop and the lease goes back;
    // whatever it returns later is not written.
    if (stop === undefined && !parked) {
      await stopWith("shutdown");
      try { await client.release(runId, epoch); } catch (error) { onError(error); }
    }
    return undefined;
  }
  if (stop !== undefined || parked) return undefined; // runq decided already, or the run waits (user, children)
  if (first.ok) {
    if (!isJsonEncodable(first.value)) {
      await client.fail(runId, epoch, { code: "result_not_json", message: "the handler's result is not JSON" });
    } else if (signal?.aborted !== true) {
      // A fenced completion claims too: this worker's one place is free either way.
      const next = await client.completeAndClaim(runId, epoch, first.value, {
        classes: options.classes, kinds: options.kinds, workerId: options.workerId,
        lease: options.lease, maxRuns: 1, claimIfFenced: true,
      });
      if (next.completed !== true) await stopWith();
      return next.runs[0];
    } else if (!(await client.complete(runId, epoch, first.value))) {
      await stopWith();
    }
  } else if (!(first.error instanceof RunStopped)) {
    if (!(await client.fail(runId, epoch, failureOf(first.error)))) await stopWith();
  }
  return undefined;
}

/** Claim and handle runs one at a time until `signal` aborts. */
export async function runWorker(options: WorkerOptions): Promise<void> {
  const { client, signal } = options;
  const onError = options.onError ?? ((error: unknown) => console.error("runq worker:", error));
  const heartbeatMs = options.heartbeatMs ?? Math.max(1, Math.floor(options.lease / 3));
  const pollMs = options.pollMs ?? 1000;
  let next: ClaimedRun | undefined; // claimed by the last completion
  while (signal?.aborted !== true) {
    let run = next;
    next = undefined;
    if (run === undefined) {
      try {
        [run] = await client.claim({
          classes: options.classes, kinds: options.kinds, workerId: options.workerId,
          lease: options.lease, maxRuns: 1,
        });
      } catch (error) {
        onError(error);
        await pause(pollMs, signal);
        continue;
      }
    }
    if (run === undefined) {
      await pause(pollMs, signal);
      continue;
    }
    try {
      next = await processRun(options, run, heartbeatMs);
    } catch (error) {
      onError(error); // a write that did not reach runq: the lease expiry takes the run back
    }
  }
  // Stopped while the last completion claimed: that run goes back at once.
  if (next !== undefined) {
    try { await client.release(next.runId, next.epoch); } catch (error) { onError(error); }
  }
}
