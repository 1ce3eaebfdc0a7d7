// Test databases: a fresh one per test file, with sql/runq.sql loaded by pg
// alone (no psql), dropped after.

import { readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";

import pg from "pg";

/** The package's root: this file is dist/testlib/db.js. */
export const PACKAGE_ROOT = fileURLToPath(new URL("../../", import.meta.url));
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

/**
 * The statements of sql/runq.sql in the batches they must be sent in. The
 * file is its deploy scripts in plan order, each headed `-- ==== deploy/...`:
 * a script in BEGIN/COMMIT goes as one simple query (a multi-statement
 * query runs in one implicit transaction, which its own BEGIN/COMMIT
 * bracket). A script without is a CREATE INDEX CONCURRENTLY one, which may
 * not run in a transaction block, so its statements go one by one; those
 * scripts hold no quoting that could hide a semicolon, which is checked.
 */
export function runqBatches(sql: string): string[] {
  const scripts = sql.split(/^(?=-- ==== deploy\/)/m);
  const batches: string[] = [];
  for (const script of scripts) {
    if (/^BEGIN;$/m.test(script)) {
      batches.push(script);
      continue;
    }
    const code = script.replace(/--.*$/gm, "");
    if (/[$']/.test(code.replace(/'[^']*'/g, ""))) {
      throw new Error(`cannot split a script with quoting it does not expect: ${script.slice(0, 80)}`);
    }
    for (const statement of code.split(/;\s*$/m)) {
      if (statement.trim() !== "") batches.push(statement);
    }
  }
  return batches;
}

export interface TestDatabase {
  url: string;
  drop(): Promise<void>;
}

/** A new database named after the process (test files run in processes of their own), runq loaded. */
export async function createTestDatabase(label: string): Promise<TestDatabase> {
  const server = serverUrl();
  const name = `runq_ts_${label}_${process.pid}`;
  const admin = new pg.Client({ connectionString: server });
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = withDatabase(server, name);
  const db = new pg.Client({ connectionString: url });
  await db.connect();
  try {
    await db.query("SET client_min_messages = warning");
    for (const batch of runqBatches(await readFile(RUNQ_SQL, "utf8"))) await db.query(batch);
  } finally {
    await db.end();
  }
  return {
    url,
    async drop() {
      const c = new pg.Client({ connectionString: server });
      await c.connect();
      try {
        await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await c.end();
      }
    },
  };
}
