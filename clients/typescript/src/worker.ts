// A minimal worker loop: claim, run a handler, heartbeat, complete or fail.
// It decides nothing the SQL does not: the first worker call that answers
// false stops the run (the handler's `stopped` signal aborts, its context
// throws RunStopped from then on) and the loop writes nothing more for it.
//
// Every worker call whose connection failed (a backend terminated, a server
// restarted, a failover) is sent again on a new connection for up to a
// lease (persist), as the Python pool does. A call whose connection broke
// may have committed: where sending it again would not be quiet (a
// completion fenced by itself, an end_tool that raises RQ004, usage or
// output counted twice), the run's row or log is asked first.

import { setTimeout as sleep } from "node:timers/promises";

import type {
  AmountsInput, ChildRun, ClaimedRun, Client, Failure, JsonObject, RunStatus, SpawnOptions, ToolIdempotency,
} from "./client.js";
import { isJsonEncodable } from "./client.js";
import { isConnectionLost, RunStopped, type StopReason } from "./errors.js";

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
   * the lease the runs really have (the settings' default may be shorter).
   * Also how long a call whose connection failed is sent again. */
  lease: number;
  /** Stops claiming; an in-flight run gets graceMs to finish, then is released. */
  signal?: AbortSignal;
  /** Pause between claims that found nothing. Default 1000. */
  pollMs?: number;
  /** Default 30 000. */
  graceMs?: number;
  /** Errors that do not end the loop (a claim or heartbeat that did not reach
   * the server; a lost connection, each time a call is sent again). */
  onError?: (error: unknown) => void;
  /** Called once runq has acknowledged this worker's completion (complete,
   * completeAndClaim) or fail of a run: it answered true, or, its answer lost
   * with the connection, the run's row showed that it had landed. Not called
   * for a run fenced, cancelled, parked (askUser, waitChildren) or released. */
  onFinished?: (runId: bigint, epoch: bigint, status: "succeeded" | "failed") => void;
}

/** How persist sends a call again. */
export interface Resend<T> {
  /** Asked before a call whose connection broke is sent again: its answer
   * if it committed after all, undefined if it did not. */
  landed?: () => Promise<T | undefined>;
  /** True once the call must not go out again (the error then goes on). */
  halt?: () => boolean;
  /** Each lost connection that is followed by another try. */
  onRetry?: (error: unknown) => void;
}

/**
 * `call`, sent again while what failed is the connection (isConnectionLost),
 * after 50 ms doubling to 1 s, for up to `patience` ms (a lease: past it the
 * run is likely someone else's); then the error goes on. A statement's own
 * error goes on at once. As the Python pool's Database.persist.
 */
export async function persist<T>(patience: number, call: () => Promise<T>, how: Resend<T> = {}): Promise<T> {
  const deadline = Date.now() + patience;
  let wait = 50;
  let sent = false;
  for (;;) {
    try {
      if (sent && how.landed !== undefined) {
        const answer = await how.landed();
        if (answer !== undefined) return answer;
      }
      sent = true;
      return await call();
    } catch (error) {
      if (!isConnectionLost(error) || Date.now() >= deadline || how.halt?.() === true) throw error;
      how.onRetry?.(error);
      await sleep(Math.max(0, Math.min(wait, deadline - Date.now())));
      wait = Math.min(wait * 2, 1000);
      if (how.halt?.() === true) throw error;
    }
  }
}

// Probes: did a call lost with its connection commit? Each reads what only
// our epoch's call can have written.

/** complete or fail: the run ended so under our epoch (fail: with our code). */
async function endedAs(client: Client, runId: bigint, epoch: bigint, status: RunStatus,
  failure?: Failure): Promise<true | undefined> {
  const run = await client.getRun(runId);
  const ours = run.status === status && run.leaseEpoch === epoch
    && (failure === undefined || run.failure?.code === failure.code);
  return ours ? true : undefined;
}

/** ask_user, wait_children: an event it logs, under our epoch (wait_children
 * with no live child queues the run at once: run.children_done). */
async function logged(client: Client, runId: bigint, epoch: bigint, types: readonly string[]
): Promise<true | undefined> {
  return (await client.runEvents(runId)).some((e) => types.includes(e.type) && e.epoch === epoch)
    ? true : undefined;
}

/** release: the run is no longer running under our epoch (released, or
 * taken since): sent again, it could only be fenced. */
async function released(client: Client, runId: bigint, epoch: bigint): Promise<true | undefined> {
  const run = await client.getRun(runId);
  return run.status === "running" && run.leaseEpoch === epoch ? undefined : true;
}

/** Usage amounts as one comparable string: keys in order, values as numbers
 * (the run.usage event holds what jsonb made of them). */
function amountsKey(amounts: Readonly<Record<string, unknown>>): string {
  return JSON.stringify(Object.keys(amounts).sort().map((k) => [k, Number(amounts[k])]));
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
async function stopReason(client: Client, runId: bigint, epoch: bigint, patience: number): Promise<StopReason> {
  try {
    const run = await persist(patience, () => client.getRun(runId));
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
  const { client, handler, signal, lease } = options;
  const onError = options.onError ?? ((error: unknown) => console.error("runq worker:", error));
  const { runId, epoch } = run;
  const resend = <T>(call: () => Promise<T>, landed?: () => Promise<T | undefined>): Promise<T> =>
    persist(lease, call, { landed, onRetry: onError });
  const stopping = new AbortController();
  const done = new AbortController(); // the handler has returned (or was given up on)
  let stop: RunStopped | undefined;
  let parked = false;
  let asking = false; // ask_user or wait_children is on its way: no heartbeat may land after it
  let beat: Promise<unknown> = Promise.resolve();

  const stopWith = async (reason?: StopReason): Promise<RunStopped> => {
    const why = reason ?? (await stopReason(client, runId, epoch, Math.min(lease, 5000)));
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
  const write = async (call: () => Promise<boolean>, landed?: () => Promise<true | undefined>): Promise<void> => {
    refuse();
    if (!(await resend(call, landed))) throw await stopWith();
  };
  // The run ends its lease and waits (ask_user, wait_children): the handler's
  // result is not written after it.
  const park = async (call: () => Promise<boolean>, events: readonly string[]): Promise<void> => {
    // A heartbeat committed after it would be fenced (the run is no longer
    // running) and log a run.fenced that no stale worker caused.
    asking = true;
    await beat.catch(() => undefined);
    try {
      await write(call, () => logged(client, runId, epoch, events));
      parked = true;
    } finally {
      asking = false;
    }
  };

  // Our epoch is ours alone: its chunks and its run.usage events are our
  // calls that landed. Counted, a lost call is known to have landed when
  // there is one more than acknowledged.
  let emitted = 0;
  let emitting: Promise<unknown> = Promise.resolve(); // emits go one at a time, to be counted
  const usageLanded = new Map<string, number>(); // by amountsKey
  const chunksLanded = (count: number) => async (): Promise<true | undefined> => {
    const output = await client.readOutput(runId, { maxChunks: 2_147_483_647 });
    return output.filter((c) => c.epoch === epoch).length >= emitted + count ? true : undefined;
  };

  const ctx: RunContext = {
    runId, epoch, run, payload: run.payload, stopped: stopping.signal,
    checkpoint: (state) => write(() => client.checkpoint(runId, epoch, state)),
    beginTurn: () => write(() => client.beginTurn(runId, epoch)),
    emit: (...chunks) => {
      const sent = emitting
        .then(() => write(() => client.emit(runId, epoch, chunks), chunksLanded(chunks.length)))
        .then(() => { emitted += chunks.length; });
      emitting = sent.catch(() => undefined);
      return sent;
    },
    beginTool: (callId, tool, idempotency, args) =>
      write(() => client.beginTool(runId, epoch, callId, tool, idempotency, args)),
    // Sent again after it committed, end_tool would raise RQ004 (the call is finished).
    endTool: (callId, outcome) => write(() => client.endTool(runId, epoch, callId, outcome), async () =>
      (await client.toolCalls(runId)).some((t) => t.callId === callId && t.status === "finished" && t.epoch === epoch)
        ? true : undefined),
    recordUsage: async (usage) => {
      const key = amountsKey(usage);
      const expected = (usageLanded.get(key) ?? 0) + 1;
      const ok = await resend(() => client.recordUsage(runId, epoch, usage), async () => {
        const events = await client.runEvents(runId);
        const landed = events.filter((e) => e.type === "run.usage" && e.epoch === epoch && amountsKey(e.payload) === key);
        if (landed.length < expected) return undefined;
        const now = await client.getRun(runId); // what it answered: whether the run was ours
        return now.status === "running" && now.leaseEpoch === epoch;
      });
      usageLanded.set(key, expected);
      if (!ok) await stopWith();
      return ok;
    },
    askUser: (question) => park(() => client.askUser(runId, epoch, question), ["run.waiting_for_user"]),
    spawn: async (key, kind, payload, options) => {
      refuse();
      // The same key by the same run is the same child: sent again, nothing is created twice.
      const child = await resend(() => client.spawn(runId, epoch, key, kind, payload, options));
      if (child === null) throw await stopWith(); // fenced, as a write's false
      return child;
    },
    waitChildren: () => park(() => client.waitChildren(runId, epoch),
      ["run.waiting_for_children", "run.children_done"]),
    children: () => resend(() => client.children(runId)),
  };

  const beating = (async () => {
    for (;;) {
      await pause(heartbeatMs, done.signal);
      if (done.signal.aborted || stop !== undefined || parked) return;
      if (asking) continue;
      try {
        beat = persist(lease, () => client.heartbeat(runId, epoch), {
          // Not once the run's last write may go: it would land after it, fenced.
          halt: () => done.signal.aborted || asking || parked || stop !== undefined,
          onRetry: onError,
        });
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
      try {
        await resend(() => client.release(runId, epoch), () => released(client, runId, epoch));
      } catch (error) {
        onError(error);
      }
    }
    return undefined;
  }
  if (stop !== undefined || parked) return undefined; // runq decided already, or the run waits (user, children)
  const finished = (status: "succeeded" | "failed"): void => {
    try { options.onFinished?.(runId, epoch, status); } catch (error) { onError(error); }
  };
  const fail = async (failure: Failure): Promise<void> => {
    if (await resend(() => client.fail(runId, epoch, failure), () => endedAs(client, runId, epoch, "failed", failure))) {
      finished("failed");
    } else {
      await stopWith();
    }
  };
  if (first.ok) {
    if (!isJsonEncodable(first.value)) {
      await fail({ code: "result_not_json", message: "the handler's result is not JSON" });
    } else if (signal?.aborted !== true) {
      // A fenced completion claims too: this worker's one place is free either way.
      // A lost one that had landed claimed a run too: that one is left to its lease.
      const next = await resend(() => client.completeAndClaim(runId, epoch, first.value, {
        classes: options.classes, kinds: options.kinds, workerId: options.workerId,
        lease: options.lease, maxRuns: 1, claimIfFenced: true,
      }), async () => (await endedAs(client, runId, epoch, "succeeded")) ? { completed: true, runs: [] } : undefined);
      if (next.completed === true) finished("succeeded");
      else await stopWith();
      return next.runs[0];
    } else if (await resend(() => client.complete(runId, epoch, first.value),
      () => endedAs(client, runId, epoch, "succeeded"))) {
      finished("succeeded");
    } else {
      await stopWith();
    }
  } else if (!(first.error instanceof RunStopped)) {
    await fail(failureOf(first.error));
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
        // A lost claim that had landed leaves its run to the lease's expiry.
        [run] = await persist(options.lease, () => client.claim({
          classes: options.classes, kinds: options.kinds, workerId: options.workerId,
          lease: options.lease, maxRuns: 1,
        }), { halt: () => signal?.aborted === true, onRetry: onError });
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
    const { runId, epoch } = next;
    try {
      await persist(options.lease, () => client.release(runId, epoch),
        { landed: () => released(client, runId, epoch), onRetry: onError });
    } catch (error) {
      onError(error);
    }
  }
}
