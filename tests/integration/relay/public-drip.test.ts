// Issue 27: anyone could hold a tenant's whole data plane through one public port. Request bodies dripped a byte at a
// time to a public sandbox's user port each held a relay slot (the head deadline re-armed on every body byte), and
// they counted in the owner's namespace cap: 32 of them and every sandbox of that tenant, envd included, answered
// 429 for as long as the drip went on. Now a request with no credential counts in public buckets of its own (per
// sandbox, per client address, and all of them), and a body must bring --request-body-min-rate bytes per window:
// the drips here first meet it (an upload at 4 KiB/s of 1 MB holds its slot for minutes: the buckets alone must
// keep the owner served), then fall under it and are answered 408.
// sandbox-e2b runs as its own process with its real flags; the attacker dials from several loopback addresses.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { waitFor } from "#tests/support/wait.ts";
import { e2bProcessFixture, spawnE2b, type Child, type E2bProcessFixture } from "../e2b/process.ts";
import { createSandbox, e2bListeners, gauge } from "./hostile.ts";

const ROOT = "root-public-drip";
const DOMAIN = "drip.test";
const KEY_A = "e2b_dripdripdripdripaaaa";
const KEY_B = "e2b_dripdripdripdripbbbb";
const USER_PORT = 3000;
/** The defaults under test: 16 public relays per sandbox, 8 per client address, 32 per namespace for token holders. */
const PUBLIC_PER_SANDBOX = 16;
const NAMESPACE_CAP = 32;
/** Short, so the test sees the minimum rate act. */
const WINDOW_S = 3;
/** What a drip sends every 200 ms: first 4 KiB/s (over the 1024 B/s minimum: the buckets alone must hold), then 5 B/s. */
const FAST_PIECE = 820;

let fixture: E2bProcessFixture;
let child: Child;
let api = "";
let proxyPort = 0;
let metricsUrl = "";
let dir = "";
const drips: Drip[] = [];

beforeAll(async () => {
  fixture = await e2bProcessFixture({ rootToken: ROOT, apiKey: KEY_A, domain: DOMAIN });
  fixture.cluster.nodes[0]!.attachGuest("*", USER_PORT, fixture.guest.port);
  dir = mkdtempSync(join(tmpdir(), "public-drip-"));
  const keys = join(dir, "tenant-keys");
  writeFileSync(keys, `${KEY_A} team-a\n${KEY_B} team-b\n`);
  const args = fixture.args.map((a) => (a.startsWith("--e2b-api-key-file=") ? `--e2b-api-key-file=${keys}` : a));
  child = spawnE2b([...args, "--metrics-bind-address=127.0.0.1:0", `--envd-proxy-request-body-rate-window=${WINDOW_S}s`]);
  ({ api, proxyPort, metricsUrl } = await e2bListeners(child));
}, 60_000);

afterAll(async () => {
  for (const d of drips) d.close();
  await child?.stop();
  await fixture?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
}, 30_000);

/**
 * A client that sends a request head announcing a 1 MB body, then a piece of it every 200 ms from `from`: FAST_PIECE
 * bytes (a slow upload that meets the minimum rate and would hold its slot for minutes), one byte after `slow()`.
 */
interface Drip {
  /** The status line the proxy answered, once it did. */
  status(): string | undefined;
  /** The proxy closed the connection. */
  closed(): boolean;
  slow(): void;
  close(): void;
}

function drip(host: string, from: string, path = "/upload"): Drip {
  const sock = net.connect({ host: "127.0.0.1", port: proxyPort, localAddress: from });
  sock.on("error", () => undefined);
  let status: string | undefined;
  let piece = FAST_PIECE;
  let closed = false;
  let head = "";
  sock.on("data", (c: Buffer) => {
    if (status !== undefined) return;
    head += c.toString("latin1");
    const nl = head.indexOf("\r\n");
    if (nl >= 0) status = head.slice(0, nl);
  });
  const timer = setInterval(() => {
    if (!sock.destroyed) sock.write("x".repeat(piece));
  }, 200);
  sock.once("close", () => {
    closed = true;
    clearInterval(timer);
  });
  sock.write(`POST ${path} HTTP/1.1\r\nhost: ${host}\r\ncontent-type: application/octet-stream\r\ncontent-length: 1000000\r\n\r\nx`);
  return {
    status: () => status,
    closed: () => closed,
    slow: () => {
      piece = 1;
    },
    close: () => {
      clearInterval(timer);
      sock.destroy();
    },
  };
}

test("dripped bodies to a public port fill only that sandbox's public bucket: the owner's envd, its other sandbox and its token holders answer; then the minimum rate ends the drips with 408", async () => {
  const a1 = await createSandbox(api, KEY_A);
  const a2 = await createSandbox(api, KEY_A);
  const b = await createSandbox(api, KEY_B);
  const publicHost = (s: { id: string }) => `${USER_PORT}-${s.id}.${DOMAIN}`;
  const ask = (s: { id: string; token: string }, port: number, path: string, token = true) =>
    fetch(`http://127.0.0.1:${proxyPort}${path}`, { headers: { host: `${port}-${s.id}.${DOMAIN}`, ...(token ? { "x-access-token": s.token } : {}) } });
  // The sandboxes are public (created with no network settings, as on e2b cloud): no token needed on a user port.
  expect((await ask(a1, USER_PORT, "/app", false)).status).toBe(200);

  // More drips than the owner's namespace cap, from five addresses (8 each: the per-client default).
  for (let i = 0; i < NAMESPACE_CAP + 8; i++) drips.push(drip(publicHost(a1), `127.0.0.${2 + Math.floor(i / 8)}`));
  await waitFor(
    "every drip held or refused",
    () => fixture.guest.openStreams() > 0 && fixture.guest.openStreams() + drips.filter((d) => d.status() !== undefined).length === drips.length,
    20_000,
    20,
  );
  const refused = drips.filter((d) => d.status() !== undefined);

  // While the drips hold every public slot of a1: the owner's envd on a1, a1's user port with its token, a2's public
  // port from a fresh address, another tenant's envd all answer (before: the owner's all answered 429).
  expect((await ask(a1, 49983, "/health")).status).toBe(204);
  expect((await ask(a1, USER_PORT, "/app")).status).toBe(200);
  expect((await ask(a2, USER_PORT, "/app", false)).status).toBe(200);
  expect((await ask(a2, 49983, "/health")).status).toBe(204);
  expect((await ask(b, 49983, "/health")).status).toBe(204);
  expect(refused).toHaveLength(drips.length - PUBLIC_PER_SANDBOX);
  expect(new Set(refused.map((d) => d.status()))).toEqual(new Set(["HTTP/1.1 429 Too Many Requests"]));
  // One more public request to a1 is refused by a1's public bucket, naming it.
  const more = await ask(a1, USER_PORT, "/app", false);
  expect(more.status).toBe(429);
  expect(await more.json()).toEqual({ code: 429, message: `too many concurrent requests without a token to this sandbox (limit ${PUBLIC_PER_SANDBOX})` });
  expect(fixture.guest.openStreams()).toBe(PUBLIC_PER_SANDBOX); // still held: they meet the minimum rate
  expect(await gauge(metricsUrl, "sandbox_envd_proxy_active_public_relays")).toBe(PUBLIC_PER_SANDBOX);
  const held = drips.filter((d) => !refused.includes(d));
  expect(held.every((d) => d.status() === undefined)).toBe(true);

  // Under the minimum rate, each held drip is answered 408 within two windows and its slot comes back.
  for (const d of held) d.slow();
  await waitFor("every held drip answered", () => held.every((d) => d.status() !== undefined), WINDOW_S * 4000, 50);
  expect(new Set(held.map((d) => d.status()))).toEqual(new Set(["HTTP/1.1 408 Request Timeout"]));
  await waitFor("the guest holds no upload", () => fixture.guest.openStreams() === 0, 10_000, 50);
  await waitFor("the public relays released", async () => (await gauge(metricsUrl, "sandbox_envd_proxy_active_public_relays")) === 0, 10_000, 100);
  expect(await gauge(metricsUrl, "sandbox_envd_proxy_slow_request_bodies_total")).toBe(PUBLIC_PER_SANDBOX);
  const metrics = await (await fetch(`${metricsUrl}/metrics`)).text();
  expect(metrics).toContain(`sandbox_envd_proxy_refused_total{cap="public_sandbox"} ${drips.length - PUBLIC_PER_SANDBOX + 1}`);
  for (const d of drips) d.close();

  // An honest upload (a body at full speed, no token) is relayed whole.
  const up = await fetch(`http://127.0.0.1:${proxyPort}/upload`, { method: "POST", headers: { host: publicHost(a1) }, body: new Uint8Array(4 * 1024 * 1024) });
  expect(await up.json()).toEqual({ bytes: 4 * 1024 * 1024 });
}, 90_000);

test("a guest that answers before the body is all there does not lift the minimum: a drip under it ends the exchange", async () => {
  const s = await createSandbox(api, KEY_A);
  // The test guest's /stream answers its head at once and streams for a minute, whatever the body does.
  const d = drip(`${USER_PORT}-${s.id}.${DOMAIN}`, "127.0.0.9", "/stream?n=600&gap=100");
  drips.push(d);
  await waitFor("the guest's head", () => d.status() !== undefined, 10_000, 20);
  expect(d.status()).toBe("HTTP/1.1 200 OK");
  const before = await gauge(metricsUrl, "sandbox_envd_proxy_slow_request_bodies_total");
  d.slow();
  await waitFor("the proxy to end the exchange", () => d.closed(), WINDOW_S * 4000, 50);
  expect(await gauge(metricsUrl, "sandbox_envd_proxy_slow_request_bodies_total")).toBe(before + 1);
  await waitFor("the public relay released", async () => (await gauge(metricsUrl, "sandbox_envd_proxy_active_public_relays")) === 0, 10_000, 100);
}, 60_000);
