// Waiting for runs and reading their output as it is written (runq.watch,
// runq.read_output), for a request handler that submitted an interactive turn.
//
// A Waiter holds one connection of its own, shared by all its waits and
// streams: it LISTENs on runq_run, then watches each run waited for (after
// LISTEN: no wake-up is lost), and reads the run again on each notification.
// A connection that broke is opened again at the next need; the watches are
// made again on it (a watch lives as long as its session) and every wait
// reads its run again. While the connection is away the waits read their
// runs every fallbackMs; while it listens, only when notified.

import pg from "pg";

import { Client, type OutputChunk, type Run } from "./client.js";

/** Statuses a wait returns at: an answer exists, or the run needs its user. */
const SETTLED = new Set(["succeeded", "failed", "cancelled", "waiting_for_user"]);

export interface WaiterOptions {
  /** Milliseconds between reads of a run while the connection is away (30 000). */
  fallbackMs?: number;
  /** Errors of the connection (it is opened again at the next need). */
  onError?: (error: unknown) => void;
}

export class TimeoutError extends Error {
  override name = "TimeoutError";
}

export class Waiter {
  readonly #config: pg.ClientConfig;
  readonly #fallbackMs: number;
  readonly #onError: (error: unknown) => void;
  readonly #waiters = new Map<bigint, Set<() => void>>();
  #session: Promise<Client> | undefined;
  #raw: pg.Client | undefined;
  /** Reads of a run that only the fallback poll woke (a lost wake-up). */
  polls = 0;

  constructor(connection: string | pg.ClientConfig, options: WaiterOptions = {}) {
    this.#config = {
      application_name: "runq-wait",
      ...(typeof connection === "string" ? { connectionString: connection } : connection),
    };
    this.#fallbackMs = options.fallbackMs ?? 30_000;
    this.#onError = options.onError ?? ((error) => console.error("runq waiter:", error));
  }

  /** The run once it is terminal or waiting_for_user; TimeoutError after timeoutMs. */
  async waitFor(runId: bigint, options: { timeoutMs?: number } = {}): Promise<Run> {
    const deadline = options.timeoutMs === undefined ? Infinity : Date.now() + options.timeoutMs;
    const woken = this.#subscribe(runId);
    try {
      let run = await (await this.#client()).watch(runId);
      while (!SETTLED.has(run.status)) {
        const left = deadline - Date.now();
        if (left <= 0) throw new TimeoutError(`run ${runId} is still ${run.status}`);
        const patience = this.#patience(left);
        if (!(await woken.next(patience)) && patience < left) this.polls++;
        run = await (await this.#client()).getRun(runId);
      }
      return run;
    } finally {
      await this.#unsubscribe(runId, woken);
    }
  }

  /** The run's output chunks after afterSeq as they are written, until the
   * run is terminal or waiting_for_user (then the last of them). */
  async *output(runId: bigint, options: { afterSeq?: bigint } = {}): AsyncGenerator<OutputChunk> {
    let after = options.afterSeq ?? 0n;
    const woken = this.#subscribe(runId);
    try {
      let run = await (await this.#client()).watch(runId);
      for (;;) {
        // The status is read before the output: no chunk commits after the
        // run ends, so the read after a settled status has the last of them.
        const settled = SETTLED.has(run.status);
        const chunks = await (await this.#client()).readOutput(runId, { afterSeq: after });
        for (const chunk of chunks) {
          after = chunk.seq;
          yield chunk;
        }
        if (chunks.length > 0) continue;
        if (settled) return;
        if (!(await woken.next(this.#patience(Infinity)))) this.polls++;
        run = await (await this.#client()).getRun(runId);
      }
    } finally {
      await this.#unsubscribe(runId, woken);
    }
  }

  /** Close the connection (pending waits fail). */
  async close(): Promise<void> {
    const raw = this.#raw;
    this.#raw = undefined;
    this.#session = undefined;
    if (raw !== undefined) await raw.end().catch(() => undefined);
  }

  /** How long a wait sleeps: until notified while the connection listens,
   * at most fallbackMs while it is away. */
  #patience(left: number): number {
    return this.#raw !== undefined ? left : Math.min(left, this.#fallbackMs);
  }

  #wake(runId: bigint): void {
    for (const wake of this.#waiters.get(runId) ?? []) wake();
  }

  #subscribe(runId: bigint): Wakeups {
    const woken = new Wakeups();
    let set = this.#waiters.get(runId);
    if (set === undefined) this.#waiters.set(runId, (set = new Set()));
    set.add(woken.wake);
    return woken;
  }

  async #unsubscribe(runId: bigint, woken: Wakeups): Promise<void> {
    const set = this.#waiters.get(runId);
    set?.delete(woken.wake);
    if (set !== undefined && set.size === 0) {
      this.#waiters.delete(runId);
      try {
        await (await this.#client()).unwatch(runId);
      } catch {
        // purged, or the session went: its watch went with it
      }
    }
  }

  /** The session: connected, listening, every pending run watched. */
  #client(): Promise<Client> {
    if (this.#session === undefined) {
      this.#session = this.#open();
      this.#session.catch(() => { this.#session = undefined; });
    }
    return this.#session;
  }

  async #open(): Promise<Client> {
    const raw = new pg.Client(this.#config);
    const lost = (error?: unknown): void => {
      if (error !== undefined) this.#onError(error);
      if (this.#raw === raw) {
        this.#raw = undefined;
        this.#session = undefined;
      }
      // Notifications sent while no connection listened are lost: every
      // wait reads its run again (and the next call opens a new session).
      for (const set of this.#waiters.values()) for (const wake of set) wake();
    };
    raw.on("error", lost);
    raw.on("end", () => lost());
    raw.on("notification", (note) => {
      if (note.channel === "runq_run" && note.payload) this.#wake(BigInt(note.payload));
    });
    await raw.connect();
    this.#raw = raw;
    await raw.query("LISTEN runq_run");
    const client = new Client(raw, { onError: this.#onError });
    for (const runId of this.#waiters.keys()) {
      try { await client.watch(runId); } catch { /* purged: its wait gets the error */ }
    }
    return client;
  }
}

/** Wake-ups of one wait: next() resolves true when woken since the last
 * call (or until ms), false at ms. */
class Wakeups {
  #pending = false;
  #resolve: ((woken: boolean) => void) | undefined;

  readonly wake = (): void => {
    if (this.#resolve !== undefined) {
      const resolve = this.#resolve;
      this.#resolve = undefined;
      resolve(true);
    } else {
      this.#pending = true;
    }
  };

  next(ms: number): Promise<boolean> {
    if (this.#pending) {
      this.#pending = false;
      return Promise.resolve(true);
    }
    return new Promise((resolve) => {
      const timer = ms === Infinity ? undefined : setTimeout(() => {
        this.#resolve = undefined;
        resolve(false);
      }, ms);
      this.#resolve = (woken) => {
        clearTimeout(timer);
        resolve(woken);
      };
    });
  }
}
