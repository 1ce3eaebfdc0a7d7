// Several hosts in one connection string (libpq's URL form): the pool's
// connections try them in order and keep the first that fits
// target_session_attrs. A read-only host is this same server behind a proxy
// that asks for read-only sessions in each startup message; a hot standby is
// the Python failover rig's to test.

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import { Client, isConnectionLost } from "../src/index.js";
import { parseHosts } from "../src/hosts.js";
import { databaseFixture, eventually } from "../testlib/fixture.js";
import { closedPort, Proxy, serverOf, withHosts } from "../testlib/proxy.js";

const db = databaseFixture("hosts");

describe("multi-host connection strings", () => {
  let proxy: Proxy;
  let readOnly: string; // the proxy, host:port
  before(async () => {
    proxy = new Proxy(serverOf(db.url), { readOnly: true });
    await proxy.start();
    readOnly = proxy.host;
  });
  after(async () => { await proxy.stop(); });

  const hostsUrl = (hosts: string[], query = ""): string => withHosts(db.url, hosts, query);
  const own = (): string => new URL(db.url).host;

  /** Submits a run through a Client on `url` (a write: refused by a read-only session). */
  async function submitThrough(url: string): Promise<bigint> {
    const c = Client.connect(url, { max: 1 }, { onError: () => undefined });
    try {
      return (await c.submit("acme", "ts.hosts")).runId;
    } finally {
      await c.close();
    }
  }

  it("takes a one-host URL as pg does, and refuses a target_session_attrs it does not know", () => {
    assert.equal(parseHosts(db.url), undefined);
    assert.equal(parseHosts("postgresql://u@h:5432/db?application_name=x"), undefined);
    assert.deepEqual(parseHosts("postgresql://u:p@h1:1,h2:2/db?connect_timeout=3&target_session_attrs=read-write"), {
      names: ["h1:1", "h2:2"],
      urls: ["postgresql://u:p@h1:1/db?connect_timeout=3", "postgresql://u:p@h2:2/db?connect_timeout=3"],
      target: "read-write",
      connectTimeoutMs: 3000,
    });
    assert.equal(parseHosts("postgresql://u@h1,h2/db")?.target, "any");
    for (const target of ["standby", "read-only", "readwrite", ""]) {
      assert.throws(() => Client.connect(hostsUrl(["h1", "h2"], `?target_session_attrs=${target}`)),
        (e: unknown) => e instanceof RangeError && e.message.includes(`target_session_attrs=${target} `));
    }
  });

  it("passes over a host that does not answer", async () => {
    const url = hostsUrl([`127.0.0.1:${await closedPort()}`, own()]);
    const runId = await submitThrough(url);
    assert.equal((await db.client.getRun(runId)).status, "queued");
  });

  it("names every host tried when none would do", async () => {
    const closed = `127.0.0.1:${await closedPort()}`;
    const c = Client.connect(hostsUrl([closed, readOnly], "?target_session_attrs=read-write"), { max: 1 });
    try {
      await assert.rejects(c.getRun(1n), (e: unknown) => {
        assert.ok(e instanceof Error);
        assert.match(e.message, new RegExp(`${closed} \\(connect ECONNREFUSED.*\\), ${readOnly} \\(read-only\\)`));
        assert.equal((e as { code?: unknown }).code, "08001");
        assert.ok(isConnectionLost(e)); // a worker sends its call again: a standby may be promoted
        return true;
      });
    } finally {
      await c.close();
    }
    await eventually(async () => proxy.open === 0); // the read-only session was ended
  });

  it("read-write passes over a read-only host; any and primary keep it", async () => {
    const before = proxy.sessions;
    const runId = await submitThrough(hostsUrl([readOnly, own()], "?target_session_attrs=read-write"));
    assert.equal((await db.client.getRun(runId)).status, "queued");
    assert.equal(proxy.sessions, before + 1); // tried, found read-only, ended
    await eventually(async () => proxy.open === 0);

    // The proxy's sessions are read-only indeed; and not a standby's.
    for (const query of ["", "?target_session_attrs=any", "?target_session_attrs=primary"]) {
      await assert.rejects(submitThrough(hostsUrl([readOnly, own()], query)),
        (e: unknown) => (e as { code?: unknown }).code === "25006" && isConnectionLost(e));
    }
  });
});
