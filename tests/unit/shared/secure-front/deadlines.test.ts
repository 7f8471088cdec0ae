// The front's slowloris guards (docs/decisions.md "secure-front-deadlines"): a connection that finishes TLS and
// sends half a head, or a later half head after a full request, is closed after headerTimeoutMs; one that never
// finishes the handshake after handshakeTimeoutMs; connections past maxConnections are closed at once. A watch (a
// response that stays open, with no request bytes after its head) outlives the header deadline.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import net from "node:net";
import tls from "node:tls";
import { type SecureFront, startSecureFront } from "#shared/secure-front/index.ts";
import { selfSignedServingCert } from "#shared/tls/index.ts";
import { waitFor } from "#tests/support/wait.ts";

const quiet = { debug() {}, info() {}, warn() {}, error() {} };
const DEADLINE_MS = 1000;
const MAX_CONNECTIONS = 8;
let front: SecureFront;
/** Lets the open watch write one more event. */
let pushEvent: (() => void) | undefined;

beforeAll(async () => {
  const serving = await selfSignedServingCert({ cn: "localhost", ips: ["127.0.0.1"] });
  front = await startSecureFront({
    name: "front-deadlines",
    bindAddress: "127.0.0.1",
    port: 0,
    tls: { cert: serving.certPem, key: serving.keyPem },
    peer: () => undefined,
    handler(req) {
      if (new URL(req.url).pathname !== "/watch") return new Response("ok");
      const enc = new TextEncoder();
      const body = new ReadableStream<Uint8Array>({
        start(c) {
          c.enqueue(enc.encode("{\"type\":\"ADDED\"}\n"));
          pushEvent = () => c.enqueue(enc.encode("{\"type\":\"MODIFIED\"}\n"));
        },
      });
      return new Response(body, { headers: { "content-type": "application/json" } });
    },
    errorResponse: (code, message) => new Response(message, { status: code }),
    maxBodyBytes: 1024,
    headerTimeoutMs: DEADLINE_MS,
    handshakeTimeoutMs: DEADLINE_MS,
    maxConnections: MAX_CONNECTIONS,
    log: quiet,
  });
});

afterAll(async () => {
  await front?.stop();
});

interface Conn {
  sock: net.Socket;
  data: () => string;
  closedAt: () => number | undefined;
}

function track(sock: net.Socket): Conn {
  let out = "";
  let closedAt: number | undefined;
  sock.on("data", (d) => (out += d));
  sock.on("close", () => (closedAt = Date.now()));
  sock.on("error", () => {});
  return { sock, data: () => out, closedAt: () => closedAt };
}

const connectTls = () =>
  new Promise<Conn>((resolve) => {
    const sock = tls.connect({ host: "127.0.0.1", port: front.port, rejectUnauthorized: false });
    const c = track(sock);
    sock.once("secureConnect", () => resolve(c));
    sock.once("close", () => resolve(c)); // refused before the handshake
  });

describe("secure front deadlines", () => {
  test("a connection that sends half a head is closed after the header deadline", async () => {
    const c = await connectTls();
    const start = Date.now();
    c.sock.write("GET /x HTTP/1.1\r\nhost: x\r\nx-slow: ");
    const closedAt = await waitFor("the half-head connection to close", c.closedAt, 8 * DEADLINE_MS, 50);
    expect(closedAt - start).toBeGreaterThanOrEqual(DEADLINE_MS - 100);
    expect(c.data()).toBe("");
  });

  test("a later head is timed from its first byte: a full request, then half a head, closes", async () => {
    const c = await connectTls();
    c.sock.write("GET /x HTTP/1.1\r\nhost: x\r\n\r\n");
    await waitFor("the first answer", () => c.data().includes("\r\n\r\nok"), 15_000, 20);
    c.sock.write("GET /y HTTP/1.1\r\nhost: x\r\n");
    await waitFor("the second, half head to be cut", c.closedAt, 15_000, 50);
  });

  test("a TCP connection that never finishes the TLS handshake is closed after the handshake deadline", async () => {
    const c = track(net.connect(front.port, "127.0.0.1"));
    const start = Date.now();
    const closedAt = await waitFor("the handshake-less connection to close", c.closedAt, 15_000, 50);
    expect(closedAt - start).toBeGreaterThanOrEqual(DEADLINE_MS - 100);
  });

  test("connections past maxConnections are closed at once; the open ones still work", async () => {
    const held = await Promise.all(Array.from({ length: MAX_CONNECTIONS }, connectTls));
    const extra = track(net.connect(front.port, "127.0.0.1"));
    await waitFor("the extra connection to be closed", extra.closedAt, 5_000, 20);
    held[0]!.sock.write("GET /x HTTP/1.1\r\nhost: x\r\n\r\n");
    await waitFor("an answer on a held connection", () => held[0]!.data().includes("ok"), 15_000, 20);
    for (const h of held) h.sock.destroy();
    await waitFor("the held connections to close", () => held.every((h) => h.closedAt() !== undefined), 5_000, 20);
    // Room again once the server has seen those closes: a new connection completes its handshake.
    await waitFor("room for a new connection", async () => {
      const again = await connectTls();
      again.sock.destroy();
      return again.closedAt() === undefined;
    }, 5_000, 50);
  });

  test("a watch stays open well past the header deadline and still streams", async () => {
    const c = await connectTls();
    c.sock.write("GET /watch HTTP/1.1\r\nhost: x\r\n\r\n");
    await waitFor("the watch's first event", () => c.data().includes("ADDED"), 15_000, 20);
    await Bun.sleep(DEADLINE_MS * 2.5); // the point of the test: longer than the deadline, with nothing sent
    expect(c.closedAt()).toBeUndefined();
    pushEvent!();
    await waitFor("the watch's later event", () => c.data().includes("MODIFIED"), 15_000, 20);
    expect(c.closedAt()).toBeUndefined();
    c.sock.destroy();
  });

});
