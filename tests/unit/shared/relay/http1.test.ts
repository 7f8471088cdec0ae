// The envd client's small exchange (the e2b surface's /init, /metrics, /envs) against a raw TCP peer playing a
// hostile envd (docs/envd-relay.md "Framing"): malformed framing fails the call at once with the protocol error,
// a reply that closes early is an error, and the exchange deadline still fires against a peer that dribbles.
import { afterEach, expect, test } from "bun:test";
import net from "node:net";
import { FramingError } from "#shared/relay/framing/index.ts";
import { exchangeOverSocket } from "#shared/relay/http1.ts";

const servers: net.Server[] = [];
afterEach(() => {
  for (const s of servers.splice(0)) s.close();
});

/** A peer that answers the request head with `reply` (then closes, unless `keepOpen`). */
async function peer(reply: (sock: net.Socket) => void): Promise<number> {
  const server = net.createServer((sock) => {
    let seen = "";
    sock.on("data", (c) => {
      seen += c.toString("latin1");
      if (seen.includes("\r\n\r\n")) reply(sock);
    });
    sock.on("error", () => undefined);
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  return (server.address() as net.AddressInfo).port;
}

async function call(port: number, timeoutMs = 2_000) {
  const sock = net.connect(port, "127.0.0.1");
  await new Promise<void>((r) => sock.once("connect", () => r()));
  return exchangeOverSocket(sock, { method: "GET", path: "/envs", headers: { host: "envd" }, timeoutMs, maxBytes: 64 * 1024 });
}

test("issue 17 case 2: envd answering the chunked body `1\\r\\nZ\\r\\n-6\\r\\nQ` fails the call with the protocol error", async () => {
  const port = await peer((s) => s.end("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n1\r\nZ\r\n-6\r\nQ"));
  const t0 = performance.now();
  const err = await call(port).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(FramingError);
  expect(performance.now() - t0).toBeLessThan(1000);
});

test("the same bytes on a connection left open also fail at once (the loop no longer starves the timers)", async () => {
  const port = await peer((s) => s.write("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n1\r\nZ\r\n-6\r\nQ"));
  expect(await call(port).catch((e: unknown) => e)).toBeInstanceOf(FramingError);
});

test.each([
  ["Content-Length not reached", "HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nhello"],
  ["chunked not terminated", "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n"],
  ["a negative Content-Length", "HTTP/1.1 200 OK\r\ncontent-length: -1\r\n\r\n"],
  ["status 600", "HTTP/1.1 600 X\r\ncontent-length: 0\r\n\r\n"],
])("%s is an error, not a truncated success", async (_what, wire) => {
  const port = await peer((s) => s.end(wire));
  expect(await call(port).catch((e: unknown) => e)).toBeInstanceOf(FramingError);
});

test("a peer that sends the head one byte at a time hits the exchange deadline", async () => {
  const port = await peer((s) => {
    const head = "HTTP/1.1 200 OK\r\nx-slow: 1\r\n";
    let i = 0;
    const t = setInterval(() => (s.destroyed ? clearInterval(t) : s.write(head[i++ % head.length]!)), 20);
    s.on("close", () => clearInterval(t));
  });
  const t0 = performance.now();
  const err = await call(port, 300).catch((e: unknown) => e);
  expect((err as Error).message).toContain("no reply within 300 ms");
  expect(performance.now() - t0).toBeLessThan(2000);
});

test("valid replies: chunked with extensions and trailers, Content-Length, close-delimited, 100 Continue first", async () => {
  const cases: [string, string][] = [
    ["HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3;x=1\r\n{\"a\r\n2\r\n\":\r\n2\r\n1}\r\n0\r\nx-t: 1\r\n\r\n", '{"a":1}'],
    ["HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}", "{}"],
    ["HTTP/1.0 200 OK\r\n\r\n[1,2]", "[1,2]"],
  ];
  for (const [wire, body] of cases) {
    const port = await peer((s) => s.end(wire));
    const r = await call(port);
    expect([r.status, r.body.toString()]).toEqual([200, body]);
  }
});
