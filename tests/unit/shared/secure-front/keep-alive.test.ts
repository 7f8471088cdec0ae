// Issue 17 leftover (c): the secure front closed a kept-alive connection only on the client's word (or after
// idleTimeoutMs of silence both ways, which a watch cannot have), so an idle connection between requests was held
// for ever. Now a connection whose responses have all ended and that sends nothing more is closed after
// keepAliveIdleMs (default: the relay listener's 90 s), while an open watch, however quiet, is not.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import tls from "node:tls";
import { type SecureFront, startSecureFront } from "#shared/secure-front/index.ts";
import { ResponseTracker } from "#shared/secure-front/keep-alive.ts";
import { selfSignedServingCert } from "#shared/tls/index.ts";
import { waitFor } from "#tests/support/wait.ts";

const quiet = { debug() {}, info() {}, warn() {}, error() {} };
const IDLE_MS = 800;
let front: SecureFront;
let pushEvent: (() => void) | undefined;

beforeAll(async () => {
  const serving = await selfSignedServingCert({ cn: "localhost", ips: ["127.0.0.1"] });
  front = await startSecureFront({
    name: "front-keep-alive",
    bindAddress: "127.0.0.1",
    port: 0,
    tls: { cert: serving.certPem, key: serving.keyPem },
    peer: () => undefined,
    handler(req) {
      const path = new URL(req.url).pathname;
      const enc = new TextEncoder();
      if (path === "/watch") {
        const body = new ReadableStream<Uint8Array>({
          start(c) {
            c.enqueue(enc.encode('{"type":"ADDED"}\n'));
            pushEvent = () => c.enqueue(enc.encode('{"type":"MODIFIED"}\n'));
          },
        });
        return new Response(body, { headers: { "content-type": "application/json" } });
      }
      if (path === "/stream") {
        // A streamed body that ends; its parts come apart, so Bun sends it chunked (a body it has whole goes sized).
        let n = 0;
        const body = new ReadableStream<Uint8Array>({
          async pull(c) {
            if (n > 0) await Bun.sleep(30);
            if (n++ < 3) c.enqueue(enc.encode(`part ${n}\n`));
            else c.close();
          },
        });
        return new Response(body);
      }
      return new Response("ok");
    },
    errorResponse: (code, message) => new Response(message, { status: code }),
    maxBodyBytes: 1024,
    keepAliveIdleMs: IDLE_MS,
    log: quiet,
  });
});
afterAll(async () => {
  await front?.stop();
});

interface Conn {
  sock: tls.TLSSocket;
  data: () => string;
  closedAt: () => number | undefined;
}

const connect = () =>
  new Promise<Conn>((resolve) => {
    let out = "";
    let closedAt: number | undefined;
    const sock = tls.connect({ host: "127.0.0.1", port: front.port, rejectUnauthorized: false });
    sock.on("data", (d) => (out += d));
    sock.on("close", () => (closedAt = Date.now()));
    sock.on("error", () => {});
    sock.once("secureConnect", () => resolve({ sock, data: () => out, closedAt: () => closedAt }));
  });

const request = (method: string, path: string) => `${method} ${path} HTTP/1.1\r\nhost: localhost\r\n\r\n`;
const count = (s: string, part: string) => s.split(part).length - 1;

describe("secure front keep-alive deadline", () => {
  test("a kept-alive connection idle after its response is closed after keepAliveIdleMs, not before", async () => {
    const c = await connect();
    // Timed from the write: the deadline starts when the response ends, which is after it. (Timed from when this
    // process noticed the answer, a loaded event loop noticing late made the gap read short.)
    const sentAt = Date.now();
    c.sock.write(request("GET", "/x"));
    await waitFor("the answer", () => (c.data().endsWith("ok") ? true : undefined), 5_000, 10);
    const closedAt = await waitFor("the idle connection to close", c.closedAt, 10 * IDLE_MS, 20);
    expect(closedAt - sentAt).toBeGreaterThanOrEqual(IDLE_MS - 5); // ms rounding of two clocks
  });

  test("a second request within the deadline is served; the connection is closed once idle after it", async () => {
    const c = await connect();
    c.sock.write(request("GET", "/x"));
    await waitFor("the first answer", () => (count(c.data(), "\r\n\r\nok") === 1 ? true : undefined), 5_000, 10);
    await Bun.sleep(IDLE_MS / 2);
    const sentAt = Date.now();
    c.sock.write(request("GET", "/stream"));
    await waitFor("the streamed answer, chunked to its last chunk", () => (/transfer-encoding: chunked/i.test(c.data()) && c.data().endsWith("\r\n0\r\n\r\n") ? true : undefined), 5_000, 10);
    expect(c.closedAt()).toBeUndefined();
    const closedAt = await waitFor("the idle connection to close", c.closedAt, 10 * IDLE_MS, 20);
    expect(closedAt - sentAt).toBeGreaterThanOrEqual(IDLE_MS - 5); // ms rounding of two clocks
  });

  test("after a HEAD answer (a head with no body) the deadline runs too", async () => {
    const c = await connect();
    c.sock.write(request("HEAD", "/x"));
    await waitFor("the HEAD answer", () => (c.data().includes("\r\n\r\n") ? true : undefined), 5_000, 10);
    const closedAt = await waitFor("the idle connection to close", c.closedAt, 10 * IDLE_MS, 20);
    expect(closedAt).toBeGreaterThan(0);
  });

  test("an open watch quiet for 3x keepAliveIdleMs is not cut, and still carries events", async () => {
    const c = await connect();
    c.sock.write(request("GET", "/watch"));
    await waitFor("the first event", () => (c.data().includes("ADDED") ? true : undefined), 5_000, 10);
    await Bun.sleep(3 * IDLE_MS);
    expect(c.closedAt()).toBeUndefined();
    pushEvent!();
    await waitFor("the later event", () => (c.data().includes("MODIFIED") ? true : undefined), 5_000, 10);
    c.sock.destroy();
  });
});

describe("the response tracker (which responses have ended)", () => {
  const b = (s: string) => Buffer.from(s, "latin1");
  test("a sized answer ends at its last byte, split anywhere; an interim 100 does not end it", () => {
    const methods = ["POST"];
    const t = new ResponseTracker(methods);
    expect(t.feed(b("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\ncontent-len"))).toBe(false);
    expect(t.feed(b("gth: 5\r\n\r\nabc"))).toBe(false);
    expect(t.feed(b("de"))).toBe(true);
    expect(t.following).toBe(true);
  });
  test("a chunked answer ends with its last chunk; a HEAD answer with its head", () => {
    const methods = ["GET"];
    const t = new ResponseTracker(methods);
    expect(t.feed(b("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n"))).toBe(false);
    expect(t.feed(b("0\r\n\r\n"))).toBe(true);
    methods.push("HEAD");
    expect(t.feed(b("HTTP/1.1 200 OK\r\ncontent-length: 99\r\n\r\n"))).toBe(true);
    expect(t.following).toBe(true);
  });
  test("what it cannot follow (an upgrade, pipelined requests, bytes nobody asked for) stops it, never ends a response", () => {
    const up = new ResponseTracker(["GET"]);
    expect(up.feed(b("HTTP/1.1 101 Switching Protocols\r\nupgrade: SPDY/3.1\r\n\r\n"))).toBe(false);
    expect(up.following).toBe(false);
    const piped = new ResponseTracker(["GET", "GET"]);
    expect(piped.feed(b("HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\nxHTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\ny"))).toBe(false);
    expect(piped.following).toBe(false);
    const unasked = new ResponseTracker([]);
    expect(unasked.feed(b("HTTP/1.1 200 OK\r\n\r\n"))).toBe(false);
    expect(unasked.following).toBe(false);
  });
});
