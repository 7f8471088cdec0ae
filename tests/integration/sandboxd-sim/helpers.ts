// Test helpers for the sandboxd simulator's integration tests: raw fetch (never the typed client, which has its own
// tests), a raw-socket HTTP/1.1 request for the Upgrade path, and a TCP echo guest.
import { afterEach } from "bun:test";
import net from "node:net";
import { startSandboxdSim, type SandboxdSim, type SimOptions } from "#services/sandboxd-sim/sim.ts";

export const ROOT = "root-token-0123";
export const KEY = "base:24.04/none/small";

/**
 * A starter for simulators (root token, fake clock, then `defaults`, then per-call options) that the calling file
 * stops after each test. Call it once at the top of a test file.
 */
export function simsPerTest(defaults: SimOptions = {}): (o?: SimOptions) => Promise<SandboxdSim> {
  let started: SandboxdSim[] = [];
  afterEach(async () => {
    await Promise.all(started.map((s) => s.stop()));
    started = [];
  });
  return async (o = {}) => {
    const s = await startSandboxdSim({ rootToken: ROOT, clock: "fake", ...defaults, ...o });
    started.push(s);
    return s;
  };
}

export interface Reply {
  status: number;
  text: string;
  json: any;
  headers: Headers;
}

export async function call(
  sim: SandboxdSim | string,
  method: string,
  path: string,
  o: { token?: string | null; body?: unknown; raw?: string; headers?: Record<string, string> } = {},
): Promise<Reply> {
  const base = typeof sim === "string" ? sim : sim.url;
  const headers: Record<string, string> = { ...(o.headers ?? {}) };
  const token = o.token === undefined ? ROOT : o.token;
  if (token !== null) headers.authorization = `Bearer ${token}`;
  let body: string | undefined = o.raw;
  if (o.body !== undefined) {
    body = JSON.stringify(o.body);
    headers["content-type"] = "application/json";
  }
  const r = await fetch(base + path, { method, headers, body });
  const text = await r.text();
  let json: any;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  return { status: r.status, text, json, headers: r.headers };
}

export async function claim(sim: SandboxdSim | string, body: Record<string, unknown> = {}, token: string | null = ROOT): Promise<Reply> {
  return call(sim, "POST", "/v1/claim", { token, body: { template: "base:24.04", ...body } });
}

/** Open a TCP connection, send a raw request head, resolve with the socket and everything read until `until`. */
export function rawRequest(url: string, head: string, until: (s: string) => boolean = (s) => s.includes("\r\n\r\n")): Promise<{ sock: net.Socket; data: () => string }> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    let buf = "";
    const sock = net.connect({ host: u.hostname, port: Number(u.port), allowHalfOpen: true });
    sock.setEncoding("utf8");
    let done = false;
    const check = () => {
      if (!done && until(buf)) {
        done = true;
        resolve({ sock, data: () => buf });
      }
    };
    sock.on("data", (d: string) => {
      buf += d;
      check();
    });
    sock.on("end", () => {
      if (!done) {
        done = true;
        resolve({ sock, data: () => buf });
      }
    });
    sock.on("error", reject);
    sock.on("connect", () => sock.write(head));
  });
}

export function upgradeHead(path: string, token: string | null, extra = ""): string {
  return `GET ${path} HTTP/1.1\r\nHost: sim\r\n${token !== null ? `Authorization: Bearer ${token}\r\n` : ""}Connection: Upgrade\r\nUpgrade: tcp\r\n${extra}\r\n`;
}

/** A TCP echo server; `ended` resolves when the peer half-closed its side. */
export async function startEcho(): Promise<{ port: number; ended: Promise<void>; stop: () => Promise<void> }> {
  let markEnded!: () => void;
  const ended = new Promise<void>((r) => (markEnded = r));
  const server = net.createServer({ allowHalfOpen: true }, (s) => {
    s.on("data", (d) => s.write(d));
    s.on("end", () => {
      markEnded();
      s.end("<bye>");
    });
    s.on("error", () => {});
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as net.AddressInfo).port;
  return { port, ended, stop: () => new Promise<void>((r) => server.close(() => r())) };
}

export { until } from "../../support/wait.ts";
