// A TCP proxy to the test server, standing in for a host of its own: stopped,
// it is a server gone (its sessions cut, its port refusing); read-only, it
// is a hot standby as far as a session can tell (it adds
// `options=-c default_transaction_read_only=on` to each startup message), so
// that multi-host connection strings and failovers can be tried against one
// server.

import net from "node:net";

const PROTOCOL_3 = 196608;

export class Proxy {
  /** Sessions started from now on are read-only. */
  readOnly: boolean;
  /** Sessions started through it. */
  sessions = 0;
  port = 0;
  readonly #sockets = new Set<net.Socket>();
  #server: net.Server | undefined;

  constructor(readonly target: { host: string; port: number }, options: { readOnly?: boolean } = {}) {
    this.readOnly = options.readOnly ?? false;
  }

  /** host:port, for a connection string. */
  get host(): string {
    return `127.0.0.1:${this.port}`;
  }

  /** Sessions open through it. */
  get open(): number {
    return [...this.#sockets].filter((s) => !s.destroyed).length / 2;
  }

  /** Listens (again) on its port: a new one the first time. */
  async start(): Promise<void> {
    const server = net.createServer((socket) => this.#accept(socket));
    await new Promise<void>((resolve) => server.listen(this.port, "127.0.0.1", resolve));
    this.port = (server.address() as net.AddressInfo).port;
    this.#server = server;
  }

  /** Its sessions cut, its port closed. */
  async stop(): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    for (const socket of this.#sockets) socket.destroy();
    this.#sockets.clear();
    if (server !== undefined) await new Promise((resolve) => server.close(resolve));
  }

  #accept(client: net.Socket): void {
    const upstream = net.connect(this.target.port, this.target.host);
    const readOnly = this.readOnly;
    for (const s of [client, upstream]) {
      this.#sockets.add(s);
      s.on("error", () => undefined);
      s.on("close", () => {
        client.destroy();
        upstream.destroy();
        this.#sockets.delete(s);
      });
    }
    let head = Buffer.alloc(0);
    const startup = (data: Buffer): void => {
      head = Buffer.concat([head, data]);
      if (head.length < 8 || head.length < head.readInt32BE(0)) return;
      client.off("data", startup);
      const length = head.readInt32BE(0);
      let message = head.subarray(0, length);
      if (head.readInt32BE(4) === PROTOCOL_3) {
        this.sessions++;
        if (readOnly) {
          // key\0value\0 ... \0: the option goes before the last \0
          const option = Buffer.from("options\0-c default_transaction_read_only=on\0");
          message = Buffer.concat([message.subarray(0, length - 1), option, Buffer.from([0])]);
          message.writeInt32BE(message.length, 0);
        }
      }
      upstream.write(Buffer.concat([message, head.subarray(length)]));
      client.pipe(upstream);
      upstream.pipe(client);
    };
    client.on("data", startup);
  }
}

/** A port nothing listens on: bound, then closed. */
export async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** `url` (a test database's) with these hosts instead of its own, and this query. */
export function withHosts(url: string, hosts: string[], query = ""): string {
  const u = new URL(url);
  const userinfo = u.username === "" ? "" : `${u.username}${u.password === "" ? "" : `:${u.password}`}@`;
  return `postgresql://${userinfo}${hosts.join(",")}${u.pathname}${query}`;
}

/** The server of a test database's URL. */
export function serverOf(url: string): { host: string; port: number } {
  const u = new URL(url);
  return { host: u.hostname, port: Number(u.port || 5432) };
}
