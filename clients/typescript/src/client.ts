// A typed client over runq's SQL functions: one method per function, each
// one `SELECT * FROM runq.<fn>(name => $1::type, ...)` with bound
// parameters. It holds no queue logic: fencing, leases, idempotency and
// every other rule are decided by the SQL, and a method returns what the
// function returned.
//
// Optional arguments left undefined (or null) are not sent, so the SQL
// defaults apply (a lease left out is the settings' default lease, not
// NULL). Required arguments are always sent; null there is SQL NULL, which
// runq rejects with InvalidArgument.

import pg from "pg";

import { fromPgError } from "./errors.js";
import { hostsPoolConfig, parseHosts } from "./hosts.js";

/** A run id or epoch as given: bigints come back as `bigint`. */
export type Id = bigint | number | string;
/** Milliseconds, or a PostgreSQL interval such as "30 seconds". */
export type Interval = number | string;
/** A point in time: a Date or a timestamptz literal. */
export type Timestamp = Date | string;
/** Usage or budget amounts as given; a string is sent as the exact number it spells. */
export type AmountsInput = Readonly<Record<string, number | string | bigint>>;
/** Usage or budget amounts as read: exact decimals, as strings ("0.0123"). */
export type Amounts = Record<string, string>;
export type JsonObject = { [key: string]: unknown };

export type RunStatus =
  | "queued" | "running" | "waiting_for_user" | "waiting_for_children"
  | "succeeded" | "failed" | "cancelled";
export type RecoveryPolicy = "resume" | "zero_work" | "fail";
export type ToolIdempotency = "read_only" | "idempotent" | "non_idempotent";

export interface Failure {
  code: string;
  message: string;
  [key: string]: unknown;
}

export interface Submitted {
  runId: bigint;
  outcome: "created" | "duplicate" | "input_delivered";
}

export interface Run {
  runId: bigint;
  tenantId: string;
  sessionId: string | null;
  kind: string;
  status: RunStatus;
  priority: number;
  attempts: number;
  maxAttempts: number;
  scheduledFor: Date | null;
  leaseEpoch: bigint;
  cancelRequested: boolean;
  result: unknown;
  failure: Failure | null;
  question: unknown;
  createdAt: Date;
  updatedAt: Date;
  finishedAt: Date | null;
  usage: Amounts;
  budget: Amounts | null;
  deadline: Date | null;
  /** The run that spawned this one (runq.spawn); null for a submitted run. */
  parentRunId: bigint | null;
}

/** One child of a run (runq.children, a runq.child_info row), in spawn order.
 * usage is the child's own totals, which include its descendants'. */
export interface ChildRun {
  key: string;
  runId: bigint;
  kind: string;
  status: RunStatus;
  result: unknown;
  failure: Failure | null;
  usage: Amounts;
}

export interface ClaimedRun {
  runId: bigint;
  epoch: bigint;
  tenantId: string;
  sessionId: string | null;
  kind: string;
  priority: number;
  payload: JsonObject;
  attempt: number;
  checkpoint: unknown;
  inputs: unknown[];
  resumed: boolean;
  leaseExpiresAt: Date;
  deadline: Date | null;
  budget: Amounts | null;
  usage: Amounts;
}

/** One chunk of a run's output (runq.read_output): seq numbers a run's
 * chunks 1, 2, 3, ...; a new epoch means the run started over. */
export interface OutputChunk {
  seq: bigint;
  epoch: bigint;
  chunk: unknown;
  createdAt: Date;
}

export interface RunEvent {
  eventId: bigint;
  epoch: bigint;
  type: string;
  payload: JsonObject;
  createdAt: Date;
}

export interface ToolCall {
  callId: string;
  tool: string;
  idempotency: ToolIdempotency;
  status: "started" | "finished" | "retryable" | "uncertain";
  epoch: bigint;
  args: JsonObject;
  outcome: unknown;
  startedAt: Date;
  finishedAt: Date | null;
}

export interface SweepAction {
  runId: bigint;
  action: string;
}

export interface SubmitOptions {
  payload?: JsonObject;
  sessionId?: string | null;
  priority?: number;
  idempotencyKey?: string | null;
  principalId?: string | null;
  scheduledFor?: Timestamp | null;
  maxAttempts?: number;
  recoveryPolicy?: RecoveryPolicy;
  queueTtl?: Interval | null;
  budget?: AmountsInput | null;
  timeout?: Interval | null;
}

/** A child's request beside its kind and payload (runq.spawn). Left out, the
 * SQL defaults apply: the parent's priority, 3 attempts, "resume", no
 * timeout of its own (the parent's deadline still bounds it), no budget of
 * its own (the ancestors' budgets still apply). */
export interface SpawnOptions {
  priority?: number;
  maxAttempts?: number;
  recoveryPolicy?: RecoveryPolicy;
  timeout?: Interval | null;
  budget?: AmountsInput | null;
}

export interface ClaimOptions {
  classes: readonly number[];
  workerId?: string;
  lease?: Interval;
  maxRuns?: number;
  kinds?: readonly string[];
}

/** What runq.complete_and_claim answered: the completion (false: fenced;
 * null: no run given), then the runs claimed after it. */
export interface CompletedAndClaimed {
  completed: boolean | null;
  runs: ClaimedRun[];
}

/** What the client needs of a pg.Pool, pg.Client or pg.PoolClient. */
export interface Queryable {
  query(config: pg.QueryArrayConfig<unknown[]>): Promise<pg.QueryArrayResult<unknown[]>>;
}

export interface ClientOptions {
  /** Errors no call is waiting for: a connection lost between calls (the
   * server restarted, the backend was terminated). Default: console.error. */
  onError?: (error: Error) => void;
}

// What the client listens on: pg.Pool and pg.Client are EventEmitters.
type Emitter = { on(event: "error", listener: (error: Error) => void): unknown };

// Everything the client has put its listener on: one listener per pool or
// connection, however many Clients are made over it (a new Client per
// checked-out PoolClient would otherwise pile them up).
const listened = new WeakSet<object>();

/**
 * pg emits 'error' on a Pool whose idle connection is lost and on a Client
 * whose connection is lost between queries; with no listener that is an
 * uncaught exception, which ends the process. pg has already marked the
 * connection broken by then: a Pool drops it and connects anew on the next
 * call, a Client rejects every later query. What is left is to log it.
 */
function listen(db: Queryable, onError: (error: Error) => void): void {
  const emitter = db as Partial<Emitter>;
  if (typeof emitter.on !== "function" || listened.has(db)) return;
  listened.add(db);
  emitter.on("error", onError);
}

const logError = (error: Error): void => console.error("runq client:", error);

const INT8 = 20;
const JSON_OID = 114;
const JSONB = 3802;

// Scoped to runq's queries (QueryConfig.types), so the caller's pg keeps its
// own parsers: ids and epochs are bigint, which a JS number cannot hold in
// full; jsonb stays text here and is decoded per column in decodeRows.
const TYPES: pg.CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: "text" | "binary") => {
    if (oid === INT8) return (text: string) => BigInt(text);
    if (oid === JSONB || oid === JSON_OID) return (text: string) => text;
    return pg.types.getTypeParser(oid, format ?? "text");
  }) as pg.CustomTypesConfig["getTypeParser"],
};

// Columns whose numbers are summed exactly (numeric) by the SQL: read with
// every number as its digits, so no float rounds them.
const EXACT_COLUMNS = new Set(["usage", "budget"]);

// A JSON string (left as it is) or a JSON number (quoted, so JSON.parse
// keeps its digits): strings are matched first, so digits inside a string
// are never touched.
const JSON_TOKEN = /"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?/g;
const JSON_NUMBER = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?$/;

/** JSON text parsed with every number a string of its exact digits. */
export function parseExactJson(text: string): unknown {
  return JSON.parse(text.replace(JSON_TOKEN, (t) => (t.startsWith('"') ? t : `"${t}"`)));
}

/** Amounts as a JSON object whose numbers are written digit for digit. A
 * value that is not a number is sent as it is, for runq to reject. */
export function exactJson(amounts: AmountsInput): string {
  const members = Object.entries(amounts).map(([key, value]) => {
    const digits = String(value);
    return `${JSON.stringify(key)}:${JSON_NUMBER.test(digits) ? digits : JSON.stringify(value)}`;
  });
  return `{${members.join(",")}}`;
}

// Ids and epochs come back as bigint, and may go back inside a document: as digits.
const bigintAsDigits = (_key: string, v: unknown): unknown =>
  typeof v === "bigint" ? v.toString() : v;

/** Whether value can be sent as a jsonb document (as the client encodes it). */
export function isJsonEncodable(value: unknown): boolean {
  try {
    JSON.stringify(value, bigintAsDigits);
    return true;
  } catch {
    return false;
  }
}

function json(value: unknown): string | null | undefined {
  return value === undefined || value === null ? value : JSON.stringify(value, bigintAsDigits);
}

function amounts(value: AmountsInput | null | undefined): string | null | undefined {
  return value === undefined || value === null ? value : exactJson(value);
}

function interval(value: Interval | null | undefined): string | null | undefined {
  return typeof value === "number" ? `${value} milliseconds` : value;
}

function camel(name: string): string {
  return name.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
}

function decodeRows(result: pg.QueryArrayResult<unknown[]>): Record<string, unknown>[] {
  const columns = result.fields.map((f) => ({
    key: camel(f.name),
    decode: f.dataTypeID === JSONB || f.dataTypeID === JSON_OID
      ? (EXACT_COLUMNS.has(f.name) ? parseExactJson : JSON.parse)
      : undefined,
  }));
  return result.rows.map((values) => {
    const row: Record<string, unknown> = {};
    columns.forEach(({ key, decode }, i) => {
      const value = values[i];
      row[key] = decode !== undefined && typeof value === "string" ? decode(value) : value;
    });
    return row;
  });
}

// One argument of a call: its SQL name, its SQL type, its value. Names and
// types are this file's literals; only values travel as parameters.
type Arg = readonly [name: string, type: string, value: unknown];

/** A required argument: always sent (undefined as SQL NULL). */
function req(name: string, type: string, value: unknown): Arg {
  return [name, type, value ?? null];
}

/** An optional argument: sent only when given, else the SQL default applies. */
function opt(name: string, type: string, value: unknown): Arg {
  return [name, type, value ?? undefined];
}

export class Client {
  readonly #db: Queryable;
  #owned: pg.Pool | undefined;

  /** A client over a pg.Pool, pg.Client or pg.PoolClient the caller owns.
   * Each call is one statement: on a connection in autocommit (pg's
   * default) its own transaction. It listens for the pool's or
   * connection's 'error' events, so that a lost connection is logged
   * (options.onError) instead of ending the process. */
  constructor(db: Queryable, options: ClientOptions = {}) {
    this.#db = db;
    listen(db, options.onError ?? logError);
  }

  /** A client owning a pg.Pool on `connectionString`; close() ends it.
   * The string may name several hosts, as libpq's URLs do
   * (`postgresql://u@h1:5432,h2:5432/db?target_session_attrs=read-write`):
   * each new connection tries them in order and keeps the first that fits
   * target_session_attrs ("any", the default; "read-write"; "primary").
   * Throws a RangeError for a target_session_attrs it does not know. */
  static connect(connectionString: string, config: pg.PoolConfig = {}, options: ClientOptions = {}): Client {
    const hosts = parseHosts(connectionString);
    // TCP keepalives, so that an idle connection to a host that vanished (a
    // failover's old primary) is found broken in seconds, not at TCP's hours.
    const configured: pg.PoolConfig = { keepAlive: true, keepAliveInitialDelayMillis: 5000, ...config };
    const pool = new pg.Pool(hosts === undefined
      ? { ...configured, connectionString } : hostsPoolConfig(hosts, configured));
    const client = new Client(pool, options);
    client.#owned = pool;
    return client;
  }

  /** End the pool connect() made (never a caller's). */
  async close(): Promise<void> {
    const pool = this.#owned;
    this.#owned = undefined;
    if (pool !== undefined) await pool.end();
  }

  async #call(fn: string, args: readonly Arg[]): Promise<Record<string, unknown>[]> {
    const sent = args.filter(([, , value]) => value !== undefined);
    const list = sent.map(([name, type], i) => `${name} => $${i + 1}::${type}`).join(", ");
    try {
      const result = await this.#db.query({
        text: `SELECT * FROM runq.${fn}(${list})`,
        values: sent.map(([, , value]) => value),
        types: TYPES,
        rowMode: "array",
      });
      return decodeRows(result);
    } catch (error) {
      throw fromPgError(error) ?? error;
    }
  }

  async #one<T>(fn: string, args: readonly Arg[]): Promise<T> {
    const rows = await this.#call(fn, args);
    if (rows.length !== 1) throw new TypeError(`runq.${fn} returned ${rows.length} rows, expected 1`);
    return rows[0] as T;
  }

  async #value(fn: string, args: readonly Arg[]): Promise<unknown> {
    return Object.values(await this.#one<Record<string, unknown>>(fn, args))[0];
  }

  async #idOrNull(fn: string, args: readonly Arg[]): Promise<bigint | null> {
    const value = await this.#value(fn, args);
    if (value !== null && typeof value !== "bigint") {
      throw new TypeError(`runq.${fn} returned ${String(value)}, expected a bigint or null`);
    }
    return value;
  }

  async #bool(fn: string, args: readonly Arg[]): Promise<boolean> {
    const value = await this.#value(fn, args);
    if (typeof value !== "boolean") throw new TypeError(`runq.${fn} returned ${String(value)}, expected a boolean`);
    return value;
  }

  // -- submitters ----------------------------------------------------------

  /** runq.submit. Raises IdempotencyConflict, SessionBusy, InvalidArgument. */
  submit(tenantId: string, kind: string, options: SubmitOptions = {}): Promise<Submitted> {
    return this.#one<Submitted>("submit", [
      req("tenant_id", "text", tenantId),
      req("kind", "text", kind),
      opt("payload", "jsonb", json(options.payload)),
      opt("session_id", "text", options.sessionId),
      opt("priority", "integer", options.priority),
      opt("idempotency_key", "text", options.idempotencyKey),
      opt("principal_id", "text", options.principalId),
      opt("scheduled_for", "timestamptz", options.scheduledFor),
      opt("max_attempts", "integer", options.maxAttempts),
      opt("recovery_policy", "text", options.recoveryPolicy),
      opt("queue_ttl", "interval", interval(options.queueTtl)),
      opt("budget", "jsonb", amounts(options.budget)),
      opt("timeout", "interval", interval(options.timeout)),
    ]);
  }

  /** runq.deliver_input: answer a waiting_for_user run (else InvalidRunState). */
  deliverInput(runId: Id, input: unknown): Promise<boolean> {
    return this.#bool("deliver_input", [req("run_id", "bigint", runId), req("input", "jsonb", json(input))]);
  }

  /** runq.cancel: "cancelled", "cancel_requested" or "already_terminal". */
  async cancel(runId: Id, reason?: string): Promise<"cancelled" | "cancel_requested" | "already_terminal"> {
    const value = await this.#value("cancel", [req("run_id", "bigint", runId), opt("reason", "text", reason)]);
    return value as "cancelled" | "cancel_requested" | "already_terminal";
  }

  /** runq.get_run. Raises RunNotFound. */
  getRun(runId: Id): Promise<Run> {
    return this.#one<Run>("get_run", [req("run_id", "bigint", runId)]);
  }

  /** runq.watch: this session is notified (NOTIFY runq_run) of the run's
   * ends and output until unwatch; the run as it is now. Waiter does the
   * listening; this is the bare call. */
  watch(runId: Id): Promise<Run> {
    return this.#one<Run>("watch", [req("run_id", "bigint", runId)]);
  }

  /** runq.unwatch: end this session's watch; false when there was none. */
  unwatch(runId: Id): Promise<boolean> {
    return this.#bool("unwatch", [req("run_id", "bigint", runId)]);
  }

  /** runq.read_output: the run's chunks after afterSeq, in order. */
  async readOutput(runId: Id, options: { afterSeq?: Id; maxChunks?: number } = {}): Promise<OutputChunk[]> {
    return (await this.#call("read_output", [
      req("run_id", "bigint", runId),
      opt("after_seq", "bigint", options.afterSeq),
      opt("max_chunks", "integer", options.maxChunks),
    ])) as unknown as OutputChunk[];
  }

  /** runq.children: the run's children in spawn order. Raises RunNotFound. */
  async children(runId: Id): Promise<ChildRun[]> {
    return (await this.#call("children", [req("run_id", "bigint", runId)])) as unknown as ChildRun[];
  }

  /** runq.run_events: the run's events in order. Raises RunNotFound. */
  async runEvents(runId: Id): Promise<RunEvent[]> {
    return (await this.#call("run_events", [req("run_id", "bigint", runId)])) as unknown as RunEvent[];
  }

  // -- workers ---------------------------------------------------------------

  /** runq.claim: up to maxRuns ready runs of these classes (and kinds); [] when none. */
  async claim(options: ClaimOptions): Promise<ClaimedRun[]> {
    return (await this.#call("claim", [
      req("classes", "integer[]", options.classes),
      opt("worker_id", "text", options.workerId),
      opt("lease", "interval", interval(options.lease)),
      opt("max_runs", "integer", options.maxRuns),
      opt("kinds", "text[]", options.kinds),
    ])) as unknown as ClaimedRun[];
  }

  /** runq.heartbeat: extend the lease; false means stop. */
  heartbeat(runId: Id, epoch: Id): Promise<boolean> {
    return this.#bool("heartbeat", [req("run_id", "bigint", runId), req("epoch", "bigint", epoch)]);
  }

  /** runq.heartbeat_many in one statement: run id -> alive (false: stop that run). */
  async heartbeatMany(runs: ReadonlyArray<{ runId: Id; epoch: Id }>): Promise<Map<bigint, boolean>> {
    const rows = await this.#call("heartbeat_many", [
      req("run_ids", "bigint[]", runs.map((r) => r.runId)),
      req("epochs", "bigint[]", runs.map((r) => r.epoch)),
    ]);
    return new Map(rows.map((r) => [r.runId as bigint, r.alive as boolean]));
  }

  /** runq.complete: the run succeeded; false when fenced. */
  complete(runId: Id, epoch: Id, result?: unknown): Promise<boolean> {
    return this.#bool("complete", [
      req("run_id", "bigint", runId), req("epoch", "bigint", epoch), opt("result", "jsonb", json(result))]);
  }

  /** runq.complete_and_claim: complete the run (runId and epoch null: none),
   * then claim as claim does, in one call and one transaction. A fenced
   * completion claims nothing unless claimIfFenced. */
  async completeAndClaim(runId: Id | null, epoch: Id | null, result: unknown,
    options: ClaimOptions & { claimIfFenced?: boolean }): Promise<CompletedAndClaimed> {
    const rows = await this.#call("complete_and_claim", [
      req("run_id", "bigint", runId),
      req("epoch", "bigint", epoch),
      req("result", "jsonb", json(result)),
      req("classes", "integer[]", options.classes),
      opt("worker_id", "text", options.workerId),
      opt("lease", "interval", interval(options.lease)),
      opt("max_runs", "integer", options.maxRuns),
      opt("kinds", "text[]", options.kinds),
      opt("claim_if_fenced", "boolean", options.claimIfFenced),
    ]);
    const completed = (rows[0]?.completed ?? null) as boolean | null;
    const runs = rows.filter((r) => r.runId !== null).map((r) => {
      const { completed: _, ...run } = r;
      return run as unknown as ClaimedRun;
    });
    return { completed, runs };
  }

  /** runq.complete_many in one statement: run id -> completed (false: fenced). */
  async completeMany(runs: ReadonlyArray<{ runId: Id; epoch: Id; result?: unknown }>
  ): Promise<Map<bigint, boolean>> {
    const rows = await this.#call("complete_many", [
      req("run_ids", "bigint[]", runs.map((r) => r.runId)),
      req("epochs", "bigint[]", runs.map((r) => r.epoch)),
      req("results", "jsonb[]", runs.map((r) => json(r.result) ?? null)),
    ]);
    return new Map(rows.map((r) => [r.runId as bigint, r.completed as boolean]));
  }

  /** runq.fail: failed for good; failure holds at least a string code. */
  fail(runId: Id, epoch: Id, failure: { code: string; message?: string; [key: string]: unknown }): Promise<boolean> {
    return this.#bool("fail", [
      req("run_id", "bigint", runId), req("epoch", "bigint", epoch), req("failure", "jsonb", json(failure))]);
  }

  /** runq.release: give the lease back now (graceful shutdown). */
  release(runId: Id, epoch: Id): Promise<boolean> {
    return this.#bool("release", [req("run_id", "bigint", runId), req("epoch", "bigint", epoch)]);
  }

  /** runq.ask_user: the run waits for the user's input (deliverInput). */
  askUser(runId: Id, epoch: Id, question: unknown): Promise<boolean> {
    return this.#bool("ask_user", [
      req("run_id", "bigint", runId), req("epoch", "bigint", epoch), req("question", "jsonb", json(question))]);
  }

  /** runq.checkpoint: the loop state a later claim resumes from. */
  checkpoint(runId: Id, epoch: Id, state: unknown): Promise<boolean> {
    return this.#bool("checkpoint", [
      req("run_id", "bigint", runId), req("epoch", "bigint", epoch), req("state", "jsonb", json(state))]);
  }

  /** runq.emit: append chunks (JSON values) to the run's output; false when fenced. */
  emit(runId: Id, epoch: Id, chunks: readonly unknown[]): Promise<boolean> {
    return this.#bool("emit", [
      req("run_id", "bigint", runId), req("epoch", "bigint", epoch),
      req("chunks", "jsonb[]", chunks.map((c) => json(c) ?? null))]);
  }

  /** runq.spawn: a queued child run of this run, named by key among its
   * children; its run_id. The same key again (from any epoch of the run)
   * answers the same child and creates nothing; with a different request it
   * raises IdempotencyConflict. null when fenced (nothing created). */
  spawn(runId: Id, epoch: Id, key: string, kind: string, payload?: JsonObject,
    options: SpawnOptions = {}): Promise<bigint | null> {
    return this.#idOrNull("spawn", [
      req("run_id", "bigint", runId),
      req("epoch", "bigint", epoch),
      req("key", "text", key),
      req("kind", "text", kind),
      opt("payload", "jsonb", json(payload)),
      opt("priority", "integer", options.priority),
      opt("max_attempts", "integer", options.maxAttempts),
      opt("recovery_policy", "text", options.recoveryPolicy),
      opt("timeout", "interval", interval(options.timeout)),
      opt("budget", "jsonb", amounts(options.budget)),
    ]);
  }

  /** runq.wait_children: the lease ends and the run waits (waiting_for_children)
   * until its last child ends, then is queued again for a resumed claim (at
   * once when no child is live). false when fenced. */
  waitChildren(runId: Id, epoch: Id): Promise<boolean> {
    return this.#bool("wait_children", [req("run_id", "bigint", runId), req("epoch", "bigint", epoch)]);
  }

  /** runq.begin_turn: before a chargeable model call (the budget gate). */
  beginTurn(runId: Id, epoch: Id): Promise<boolean> {
    return this.#bool("begin_turn", [req("run_id", "bigint", runId), req("epoch", "bigint", epoch)]);
  }

  /** runq.begin_tool: before the tool executes. */
  beginTool(runId: Id, epoch: Id, callId: string, tool: string, idempotency: ToolIdempotency,
    args?: JsonObject): Promise<boolean> {
    return this.#bool("begin_tool", [
      req("run_id", "bigint", runId), req("epoch", "bigint", epoch), req("call_id", "text", callId),
      req("tool", "text", tool), req("idempotency", "text", idempotency), opt("args", "jsonb", json(args))]);
  }

  /** runq.end_tool: the tool call's outcome. */
  endTool(runId: Id, epoch: Id, callId: string, outcome: unknown): Promise<boolean> {
    return this.#bool("end_tool", [
      req("run_id", "bigint", runId), req("epoch", "bigint", epoch), req("call_id", "text", callId),
      req("outcome", "jsonb", json(outcome))]);
  }

  /** runq.tool_calls: the run's tool calls. */
  async toolCalls(runId: Id): Promise<ToolCall[]> {
    return (await this.#call("tool_calls", [req("run_id", "bigint", runId)])) as unknown as ToolCall[];
  }

  /** runq.record_usage: add to the run's exact totals. Recorded even from a
   * fenced epoch (spend is a fact), which then answers false. Raises
   * InvalidArgument for an epoch the run never had. */
  recordUsage(runId: Id, epoch: Id, usage: AmountsInput): Promise<boolean> {
    return this.#bool("record_usage", [
      req("run_id", "bigint", runId), req("epoch", "bigint", epoch), req("usage", "jsonb", exactJson(usage))]);
  }

  /** runq.sweep (granted to workers too): what it did to each run it touched. */
  async sweep(maxRuns?: number): Promise<SweepAction[]> {
    return (await this.#call("sweep", [opt("max_runs", "integer", maxRuns)])) as unknown as SweepAction[];
  }
}
