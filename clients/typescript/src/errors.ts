// Exceptions named after the SQLSTATEs of runq's contract. pg reports an
// SQLSTATE it does not know (RQ001, ...) as a plain DatabaseError with
// `code`; fromPgError gives it back its name. DETAIL and HINT are kept, and
// the pg error is the `cause`.

export class RunqError extends Error {
  /** The SQLSTATE runq raised. */
  readonly sqlstate: string;
  readonly detail: string | undefined;
  readonly hint: string | undefined;

  constructor(message: string, sqlstate: string, options: {
    detail?: string | undefined; hint?: string | undefined; cause?: unknown;
  } = {}) {
    super(message, { cause: options.cause });
    this.name = new.target.name;
    this.sqlstate = sqlstate;
    this.detail = options.detail;
    this.hint = options.hint;
  }
}

type RunqErrorOptions = ConstructorParameters<typeof RunqError>[2];

/** Same idempotency key, different request (RQ001). */
export class IdempotencyConflict extends RunqError {
  constructor(message: string, options?: RunqErrorOptions) { super(message, "RQ001", options); }
}

/** The session already has a queued or running run; DETAIL names it (RQ002). */
export class SessionBusy extends RunqError {
  constructor(message: string, options?: RunqErrorOptions) { super(message, "RQ002", options); }
}

/** No run has that id (RQ003). */
export class RunNotFound extends RunqError {
  constructor(message: string, options?: RunqErrorOptions) { super(message, "RQ003", options); }
}

/** The operation does not apply to the run's status (RQ004). */
export class InvalidRunState extends RunqError {
  constructor(message: string, options?: RunqErrorOptions) { super(message, "RQ004", options); }
}

/** A bad argument: invalid_parameter_value (22023). */
export class InvalidArgument extends RunqError {
  constructor(message: string, options?: RunqErrorOptions) { super(message, "22023", options); }
}

/** The login role lacks the runq role for this function: insufficient_privilege (42501). */
export class PermissionDenied extends RunqError {
  constructor(message: string, options?: RunqErrorOptions) { super(message, "42501", options); }
}

const BY_SQLSTATE: Record<string, new (message: string, options?: RunqErrorOptions) => RunqError> = {
  RQ001: IdempotencyConflict,
  RQ002: SessionBusy,
  RQ003: RunNotFound,
  RQ004: InvalidRunState,
  "22023": InvalidArgument,
  "42501": PermissionDenied,
};

interface PgErrorLike {
  code?: unknown;
  message?: unknown;
  detail?: unknown;
  hint?: unknown;
}

/** The runq error for a pg error, or undefined when its SQLSTATE is not one of runq's. */
export function fromPgError(error: unknown): RunqError | undefined {
  if (typeof error !== "object" || error === null) return undefined;
  const e = error as PgErrorLike;
  const cls = typeof e.code === "string" ? BY_SQLSTATE[e.code] : undefined;
  if (cls === undefined) return undefined;
  return new cls(String(e.message), {
    detail: typeof e.detail === "string" ? e.detail : undefined,
    hint: typeof e.hint === "string" ? e.hint : undefined,
    cause: error,
  });
}

/**
 * Why a worker must stop a run: a fenced worker call answered `false`. Not an
 * SQLSTATE: runq never raises for fencing. `reason` is what the run's row
 * said after the refusal: "cancelled", "deadline_exceeded",
 * "budget_exhausted" (runq stopped it under this epoch), "fenced" (anything
 * else took it away, or the reason could not be read), "finished" (this
 * handler's askUser or waitChildren went out already), or "shutdown" (the
 * worker loop's grace ran out and it gave the run back).
 */
export type StopReason =
  | "fenced" | "cancelled" | "deadline_exceeded" | "budget_exhausted" | "finished" | "shutdown";

export class RunStopped extends Error {
  readonly runId: bigint;
  readonly epoch: bigint;
  readonly reason: StopReason;

  constructor(runId: bigint, epoch: bigint, reason: StopReason) {
    super(`run ${runId} epoch ${epoch} stopped: ${reason}`);
    this.name = "RunStopped";
    this.runId = runId;
    this.epoch = epoch;
    this.reason = reason;
  }
}

// What a lost connection looks like: SQLSTATE class 08 (connection
// exception), a backend ended by an operator or a crash (57P01, 57P02) or a
// server not accepting connections yet (57P03), a write that reached a
// read-only standby (25006: a failover under way), or the socket's own
// errors. pg reports a connection it lost or could not make as a plain
// Error with no code; its other plain Errors are mistakes of the caller's.
// Connect timeouts only: a query_timeout ("Query read timeout") leaves the
// statement running on a live connection, where it may still commit after
// a probe looked, so sending it again could apply it twice.
const LOST_MESSAGE = /Connection terminated|is not queryable|timeout expired|timeout exceeded when trying to connect/;
const LOST_CODES = new Set([
  "57P01", "57P02", "57P03", "25006",
  "ECONNREFUSED", "ECONNRESET", "ECONNABORTED", "EPIPE", "ETIMEDOUT", "EHOSTUNREACH", "ENETUNREACH",
  "EAI_AGAIN",
]);

/**
 * Whether `error` says the connection failed rather than the statement: the
 * call may be sent again on another connection (it may also have committed
 * before the connection went). A statement's own error (a SQLSTATE of
 * another class, a RunqError, a TypeError of the client) is not.
 */
export function isConnectionLost(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const code = (error as { code?: unknown }).code;
  if (typeof code === "string") return code.startsWith("08") || LOST_CODES.has(code);
  // "Connection terminated unexpectedly", "Client has encountered a connection
  // error and is not queryable", "timeout expired", "timeout exceeded when
  // trying to connect", "Connection terminated due to connection timeout".
  return Object.getPrototypeOf(error) === Error.prototype && LOST_MESSAGE.test(error.message);
}
