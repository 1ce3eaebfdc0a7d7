// Test databases: a fresh one per test file, with sql/runq.sql loaded by pg
// alone (no psql), dropped after.

import { readFile } from "node:fs/promises";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";

import pg from "pg";

export const RUNQ_SQL = fileURLToPath(new URL("../../../../sql/runq.sql", import.meta.url));

export function serverUrl(): string {
  const url = process.env.RUNQ_DATABASE_URL;
  if (url === undefined || url === "") {
    throw new Error("set RUNQ_DATABASE_URL to a superuser URL of a PostgreSQL server");
  }
  return url;
}

function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${encodeURIComponent(database)}`;
  return u.toString();
}

// A test's connection lost between queries is logged, not an uncaught
// exception that ends the test process: a query on it still fails the test.
const logError = (error: Error): void => console.error("testlib: connection error:", error);

/** A connected pg.Client with an 'error' listener. */
export async function connectClient(connectionString: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString });
  client.on("error", logError);
  await client.connect();
  return client;
}

/** A pg.Pool with an 'error' listener (for its idle connections). */
export function newPool(config: pg.PoolConfig): pg.Pool {
  const pool = new pg.Pool(config);
  pool.on("error", logError);
  return pool;
}

async function onServer<T>(server: string, work: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = await connectClient(server);
  try {
    return await work(c);
  } finally {
    await c.end();
  }
}

export interface TestDatabase {
  url: string;
  /** Drops the database; fails if a test left a connection to it open. */
  drop(): Promise<void>;
}

/** A new database named after the process (test files run in processes of their own), runq loaded. */
export async function createTestDatabase(label: string): Promise<TestDatabase> {
  const server = serverUrl();
  const name = `runq_ts_${label}_${process.pid}`;
  await onServer(server, async (c) => {
    await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await c.query(`CREATE DATABASE ${name}`);
  });
  const url = withDatabase(server, name);
  // sql/runq.sql runs in a transaction block: one simple query, one implicit transaction.
  const sql = await readFile(RUNQ_SQL, "utf8");
  await onServer(url, async (c) => {
    await c.query("SET client_min_messages = warning");
    await c.query(sql);
  });
  return {
    url,
    drop: () => onServer(server, async (c) => {
      // pool.end() resolves before its connections have closed: give their
      // backends a moment to go, so that only a leaked one is forced out.
      const others = async (): Promise<string[]> => (await c.query(
        `SELECT coalesce(nullif(application_name, ''), 'pid ' || pid) AS who FROM pg_stat_activity
          WHERE datname = $1 AND backend_type = 'client backend'`, [name])).rows.map((r) => r.who as string);
      const until = Date.now() + 5_000;
      let left = await others();
      while (left.length > 0 && Date.now() < until) {
        await sleep(20);
        left = await others();
      }
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      if (left.length > 0) throw new Error(`${name} still had connections open: ${left.join(", ")}`);
    }),
  };
}
