// Several hosts in one connection string, as libpq takes them:
//
//   postgresql://user@host1:5432,host2:5433/db?target_session_attrs=read-write
//
// pg reads one host only. Client.connect gives such a string to a pool whose
// connections come from hostsClient: each new connection tries the hosts in
// order, each with a connect timeout, and keeps the first that answers and
// fits target_session_attrs; a read-only one is ended and the next one
// tried. Nothing is remembered between connections, so a pool whose
// connections a failover ended finds the promoted standby at its next
// connect, as libpq would.

import { EventEmitter } from "node:events";

import pg from "pg";

/** libpq's target_session_attrs, those a worker can use: "any" (the
 * default), "read-write" (the session's transactions are not read-only:
 * SHOW transaction_read_only), "primary" (the server is not a standby:
 * pg_is_in_recovery()). */
export type TargetSessionAttrs = "any" | "read-write" | "primary";

const TARGETS: readonly TargetSessionAttrs[] = ["any", "read-write", "primary"];

export interface HostList {
  /** host[:port] of each, in order, for messages. */
  names: string[];
  /** A single-host connection string for each: the given one with that host alone. */
  urls: string[];
  target: TargetSessionAttrs;
  /** The string's connect_timeout (libpq's, in seconds, per host), in ms. */
  connectTimeoutMs: number | undefined;
}

// scheme, then the authority (userinfo@hosts) up to the path, query or fragment.
const URL_FORM = /^(postgres(?:ql)?:\/\/)([^/?#]*)(.*)$/s;

/**
 * The hosts of a connection string in URL form, or undefined when pg can
 * take it as it is: one host (or none) and no target_session_attrs, or not
 * a URL. Throws a RangeError for a target_session_attrs it does not know.
 */
export function parseHosts(connectionString: string): HostList | undefined {
  const match = URL_FORM.exec(connectionString);
  if (match === null) return undefined;
  const [, scheme = "", authority = "", rest = ""] = match;
  const at = authority.lastIndexOf("@");
  const userinfo = authority.slice(0, at + 1);
  const names = authority.slice(at + 1).split(",");
  const q = rest.indexOf("?");
  const path = q < 0 ? rest : rest.slice(0, q);
  const kept: string[] = [];
  let target: string | undefined;
  let connectTimeout: string | undefined;
  for (const param of q < 0 ? [] : rest.slice(q + 1).split("&")) {
    const eq = param.indexOf("=");
    const key = decodeURIComponent(eq < 0 ? param : param.slice(0, eq));
    const value = eq < 0 ? "" : decodeURIComponent(param.slice(eq + 1));
    if (key === "target_session_attrs") {
      target = value;
      continue; // libpq's, not a server setting: pg is not given it
    }
    if (key === "connect_timeout") connectTimeout = value;
    kept.push(param);
  }
  if (target !== undefined && !TARGETS.includes(target as TargetSessionAttrs)) {
    throw new RangeError(`target_session_attrs=${target} is not supported: use ${TARGETS.join(", ")}`);
  }
  if (names.length === 1 && target === undefined) return undefined;
  const query = kept.length > 0 ? `?${kept.join("&")}` : "";
  const seconds = Number(connectTimeout);
  return {
    names,
    urls: names.map((host) => `${scheme}${userinfo}${host}${path}${query}`),
    target: (target ?? "any") as TargetSessionAttrs,
    connectTimeoutMs: connectTimeout !== undefined && seconds > 0 ? seconds * 1000 : undefined,
  };
}

/** Per host, when neither the pool's connectionTimeoutMillis nor the string's connect_timeout says. */
const DEFAULT_CONNECT_TIMEOUT_MS = 5000;

/**
 * A pg.Pool's config over these hosts: its `Client` tries them in order.
 * connectionTimeoutMillis (else the string's connect_timeout, else 5 s)
 * bounds each host's attempt; the pool's own timer, which bounds a whole
 * connect, gets that times the number of hosts.
 */
export function hostsPoolConfig(hosts: HostList, config: pg.PoolConfig): pg.PoolConfig {
  const perHost = config.connectionTimeoutMillis ?? hosts.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
  const { connectionString: _, ...rest } = config;
  return {
    ...rest,
    connectionTimeoutMillis: config.connectionTimeoutMillis === undefined
      ? undefined : perHost * hosts.names.length,
    Client: hostsClient(hosts, perHost) as unknown as pg.PoolConfig["Client"],
  };
}

/** Whether the session is not what target wants (its connection is then ended). */
async function unfit(conn: pg.Client, target: TargetSessionAttrs): Promise<string | undefined> {
  if (target === "read-write") {
    const { rows } = await conn.query("SHOW transaction_read_only");
    return rows[0]?.transaction_read_only === "on" ? "read-only" : undefined;
  }
  if (target === "primary") {
    const { rows } = await conn.query("SELECT pg_is_in_recovery() AS standby");
    return rows[0]?.standby === true ? "a standby" : undefined;
  }
  return undefined;
}

// pg.Client's state that pg.Pool reads (not in its types).
type PoolRead = { _queryable: boolean; _ending: boolean };

/**
 * The pool's `Client`: a pg.Client can connect once only, so this one makes
 * one per host tried, keeps the first that fits, and hands the pool's calls
 * (connect, query, end, the 'error', 'end', 'notice' and 'notification'
 * events, the state the pool reads) to it.
 */
function hostsClient(hosts: HostList, timeoutMs: number) {
  return class HostsClient extends EventEmitter {
    readonly #config: pg.ClientConfig;
    #conn: pg.Client | undefined; // the one kept
    #trying: pg.Client | undefined; // the attempt under way
    #ending = false;

    constructor(config: pg.ClientConfig = {}) {
      super();
      this.#config = config;
    }

    connect(callback?: (error?: Error) => void): Promise<this> | undefined {
      const connected = this.#open().then(() => this);
      if (callback === undefined) return connected;
      connected.then(() => callback(), (error: Error) => callback(error));
      return undefined;
    }

    async #open(): Promise<void> {
      const tried: string[] = [];
      for (const [i, url] of hosts.urls.entries()) {
        if (this.#ending) break;
        const name = hosts.names[i] ?? url;
        const conn = new pg.Client({ ...this.#config, connectionString: url, connectionTimeoutMillis: timeoutMs });
        const ignore = (): void => undefined; // an attempt's errors are its connect's
        conn.on("error", ignore);
        this.#trying = conn;
        let why: string | undefined;
        try {
          await conn.connect();
          why = await unfit(conn, hosts.target);
        } catch (error) {
          // As libpq: a server that answered and refused our credentials ends the search.
          const code = (error as { code?: unknown }).code;
          if (typeof code === "string" && code.startsWith("28")) {
            void conn.end().catch(ignore);
            throw error;
          }
          why = error instanceof Error && error.message !== "" ? error.message : String(code ?? error);
        } finally {
          this.#trying = undefined;
        }
        if (why !== undefined || this.#ending) {
          void conn.end().catch(ignore); // not waited for: the next host is
          tried.push(`${name} (${why ?? "ended"})`);
          continue;
        }
        conn.off("error", ignore);
        conn.on("error", (error) => this.emit("error", error));
        conn.on("end", () => this.emit("end"));
        conn.on("notice", (notice) => this.emit("notice", notice));
        conn.on("notification", (note) => this.emit("notification", note));
        this.#conn = conn;
        return;
      }
      // 08001, sqlclient_unable_to_establish_sqlconnection: a lost connection
      // to whoever retries (a failover may not have promoted anyone yet).
      throw Object.assign(
        new Error(`no host of ${hosts.names.join(",")} would do for target_session_attrs=${hosts.target}: ${
          tried.join(", ")}`),
        { code: "08001" });
    }

    query(...args: unknown[]): unknown {
      if (this.#conn === undefined) throw new Error("Client is not connected and is not queryable");
      return (this.#conn.query as (...a: unknown[]) => unknown).apply(this.#conn, args);
    }

    end(callback?: (error?: Error) => void): Promise<void> | undefined {
      this.#ending = true;
      const conn = this.#conn ?? this.#trying;
      const ended = conn === undefined ? Promise.resolve() : conn.end();
      if (callback === undefined) return ended;
      ended.then(() => callback(), (error: Error) => callback(error));
      return undefined;
    }

    isConnected(): boolean {
      return this.#conn !== undefined;
    }

    get _queryable(): boolean {
      return this.#conn !== undefined && (this.#conn as unknown as PoolRead)._queryable;
    }

    get _ending(): boolean {
      return this.#ending || (this.#conn !== undefined && (this.#conn as unknown as PoolRead)._ending);
    }
  };
}
