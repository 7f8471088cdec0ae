// Issue 17 case 10: the relay's keep-alive connections were never reaped (`idleTimeout: 0`). Bun's idleTimeout
// counts silence on the socket whatever the request is doing (it cut a quiet response stream, a slow response head
// and a slow upload alike, measured on 1.4.5), so the relay holds it off while a request is answered and re-arms it
// when the response ends (shared/relay/idle.ts). With the timeout shortened to 2 s: an idle keep-alive connection
// is closed, and a stream, a response head and a WebSocket each quiet for 8 s (four times the timeout, past Bun's
// coarse timer) are not cut. The binary's 90 s default is above the 30 s a quiet stream was asked to survive.
import { afterAll, beforeAll, expect, test } from "bun:test";
import net from "node:net";
import http2 from "node:http2";
import { startSandboxdSim, type SandboxdSim } from "#services/sandboxd-sim/sim.ts";
import { deriveAccessToken } from "#shared/e2b/index.ts";
import { createLogger } from "#shared/log/index.ts";
import { EnvdRelay, serveRelay } from "#shared/relay/index.ts";
import { SandboxdClient } from "#shared/sandboxd/client.ts";
import { until } from "#tests/support/wait.ts";

const ROOT = "idle-root";
const SECRET = "idle-secret";
const DOMAIN = "idle.test";
const IDLE_S = 2;
const QUIET_MS = 8_000;

let sim: SandboxdSim;
let guest: ReturnType<typeof Bun.serve>;
let proxy: ReturnType<typeof Bun.serve>;
let host: string;
let token: string;

beforeAll(async () => {
  sim = await startSandboxdSim({ rootToken: ROOT, pools: ["img/none/small=1"] });
  guest = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    idleTimeout: 0,
    development: false,
    async fetch(req, server) {
      const path = new URL(req.url).pathname;
      if (path === "/ws" && server.upgrade(req, { data: undefined })) return undefined;
      if (path === "/slow-head") {
        await Bun.sleep(QUIET_MS);
        return new Response("late head");
      }
      if (path === "/quiet-stream") {
        let sent = 0;
        const stream = new ReadableStream<Uint8Array>({
          async pull(ctrl) {
            if (sent++ === 0) return ctrl.enqueue(new TextEncoder().encode("first\n"));
            await Bun.sleep(QUIET_MS);
            ctrl.enqueue(new TextEncoder().encode("after the quiet\n"));
            ctrl.close();
          },
        });
        return new Response(stream);
      }
      return new Response("quick");
    },
    websocket: {
      message(ws, m) {
        ws.send(`echo ${String(m)}`);
      },
    },
  });
  const claimed = await new SandboxdClient({ baseUrl: sim.url, token: ROOT }).claim({ template: "img", claim_ref: "idle/x" });
  sim.attachGuest(claimed.id, 3000, guest.port!);
  const relay = new EnvdRelay({
    domain: DOMAIN,
    fleet: { nodes: () => [], ready: async () => undefined, stop: async () => undefined },
    envdSecret: SECRET,
    rootToken: ROOT,
    namespace: "",
    guestHttp2: false,
    log: createLogger({ level: "error" }),
  });
  relay.primeOwner(claimed.id, sim.addr, claimed.token, "test");
  proxy = serveRelay(relay, { address: "127.0.0.1:0", log: createLogger({ level: "error" }), idleTimeoutSeconds: IDLE_S });
  host = `3000-${claimed.id.replace("sb_", "sb-")}.${DOMAIN}`;
  token = deriveAccessToken(SECRET, claimed.token);
}, 60_000);
afterAll(async () => {
  await proxy.stop(true);
  await guest.stop(true);
  await sim.stop();
});

/** A keep-alive connection to the proxy that records what arrives and when the server closes it. */
async function connection(): Promise<{ send(path: string): void; received(): string; closed(): boolean }> {
  const sock = net.connect(proxy.port!, "127.0.0.1");
  await new Promise<void>((r) => sock.once("connect", () => r()));
  let text = "";
  let closed = false;
  sock.on("data", (c: Buffer) => (text += c.toString("latin1")));
  sock.on("close", () => (closed = true));
  sock.on("error", () => undefined);
  return {
    send: (path) => sock.write(`GET ${path} HTTP/1.1\r\nHost: ${host}\r\nX-Access-Token: ${token}\r\n\r\n`),
    received: () => text,
    closed: () => closed,
  };
}

test("an idle keep-alive connection is reaped once it has been idle for about the idle timeout", async () => {
  const c = await connection();
  const sentAt = Date.now();
  c.send("/quick");
  await until(() => c.received().endsWith("quick"), "the relayed answer", 10_000, 10);
  await until(() => c.closed(), "the proxy to close the idle connection", 20_000, 50);
  // Only an upper bound: Bun sweeps socket timeouts on a coarse tick (uSockets' 4 s granularity), so a 2 s timeout
  // fires anywhere up to a tick past it, and sometimes before 2 s (a loaded suite run saw 1.47 s). What a client relies on is that an
  // idle connection is reaped at all (before issue 17 it never was) and that an active one is not cut (the tests below).
  expect(Date.now() - sentAt).toBeLessThan(IDLE_S * 1000 + 8_000);
}, 30_000);

test("a response stream quiet for 4x the idle timeout is not cut, and the connection is reaped once it ends", async () => {
  const c = await connection();
  c.send("/quiet-stream");
  await until(() => c.received().includes("first"), "the first chunk", 10_000, 10);
  await until(() => c.received().includes("after the quiet") || c.closed(), "the stream to resume", QUIET_MS + 10_000, 50);
  expect(c.received()).toContain("after the quiet");
  await until(() => c.received().includes("\r\n0\r\n\r\n"), "the stream's end", 10_000, 10);
  expect(c.closed()).toBe(false);
  await until(() => c.closed(), "the idle connection to be reaped after the stream", 20_000, 50);
}, 40_000);

test("over cleartext HTTP/2, a response stream quiet for 4x the idle timeout is not cut either", async () => {
  const session = http2.connect(`http://127.0.0.1:${proxy.port}`);
  session.on("error", () => undefined);
  let body = "";
  let ended = false;
  const stream = session.request({ ":path": "/quiet-stream", ":authority": host, "x-access-token": token });
  stream.on("data", (d: Buffer) => (body += d.toString()));
  stream.on("end", () => (ended = true));
  stream.on("error", () => (ended = true));
  await until(() => body.includes("first"), "the first chunk over h2", 10_000, 10);
  await until(() => ended, "the h2 stream to end", QUIET_MS + 10_000, 50);
  expect(body).toBe("first\nafter the quiet\n");
  session.close();
}, 30_000);

test("a guest that takes 4x the idle timeout to send its response head is waited for", async () => {
  const c = await connection();
  c.send("/slow-head");
  await until(() => c.received().includes("late head") || c.closed(), "the late answer", QUIET_MS + 10_000, 50);
  expect(c.received()).toContain("late head");
}, 30_000);

test("a relayed WebSocket quiet for 4x the idle timeout stays open and still carries messages", async () => {
  const ws = new WebSocket(`ws://127.0.0.1:${proxy.port}/ws`, { headers: { host, "x-access-token": token } } as unknown as string[]);
  const got: string[] = [];
  let closed = false;
  ws.addEventListener("message", (e) => got.push(String(e.data)));
  ws.addEventListener("close", () => (closed = true));
  await new Promise<void>((resolve, reject) => {
    ws.addEventListener("open", () => resolve());
    ws.addEventListener("error", () => reject(new Error("websocket failed to open")));
  });
  await Bun.sleep(QUIET_MS); // the silence under test: nothing to wait on but time
  expect(closed).toBe(false);
  ws.send("after the quiet");
  await until(() => got.length === 1 || closed, "the echo", 10_000, 10);
  expect(got).toEqual(["echo after the quiet"]);
  ws.close();
}, 30_000);
