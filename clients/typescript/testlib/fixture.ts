// One fresh runq database per test file, a Client on it, and raw SQL for
// what a test sets up or inspects outside the client.

import { after, before } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";

import pg from "pg";

import { Client } from "../src/index.js";
import { createTestDatabase, newPool, type TestDatabase } from "./db.js";

export interface Fixture {
  readonly url: string;
  readonly client: Client;
  sql(text: string, values?: unknown[]): Promise<pg.QueryResult>;
}

export function databaseFixture(label: string): Fixture {
  let db: TestDatabase | undefined;
  let client: Client | undefined;
  let admin: pg.Pool | undefined;
  before(async () => {
    db = await createTestDatabase(label);
    client = Client.connect(db.url, { max: 4 });
    admin = newPool({ connectionString: db.url, max: 2 });
  });
  // Every connection ends before the drop, which fails on one left open.
  after(async () => {
    await client?.close();
    await admin?.end();
    await db?.drop();
  });
  const ready = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error("the fixture's database is not set up yet");
    return value;
  };
  return {
    get url() { return ready(db).url; },
    get client() { return ready(client); },
    sql: (text, values) => ready(admin).query(text, values),
  };
}

/** Wait until `check` holds, for up to `ms`. */
export async function eventually(check: () => Promise<boolean>, ms = 10_000): Promise<void> {
  const until = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > until) throw new Error("timed out waiting for a condition");
    await sleep(20);
  }
}
