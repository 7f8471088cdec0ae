// The h2c guest leg (--guest-http2) against a raw HTTP/2 peer that answers `:status` 600 or 99, which no HTTP/2
// server library will send: the exchange rejects (the proxy's 502 envelope) instead of throwing in an event
// handler, where Response's RangeError escaped as an uncaught exception.
import { afterEach, expect, test } from "bun:test";
import net from "node:net";
import { forwardHttp2 } from "#shared/relay/guest.ts";

const servers: net.Server[] = [];
afterEach(() => {
  for (const s of servers.splice(0)) s.close();
});

const frame = (type: number, flags: number, stream: number, payload: Buffer) => {
  const h = Buffer.alloc(9);
  h.writeUIntBE(payload.length, 0, 3);
  h[3] = type;
  h[4] = flags;
  h.writeUInt32BE(stream, 5);
  return Buffer.concat([h, payload]);
};

/** Speaks just enough HTTP/2: its SETTINGS, an ACK of the client's, then HEADERS `:status <status>` on stream 1. */
async function rawH2(status: string): Promise<number> {
  const server = net.createServer((sock) => {
    sock.on("error", () => undefined);
    sock.write(frame(0x4, 0, 0, Buffer.alloc(0)));
    let answered = false;
    let seen = Buffer.alloc(0);
    sock.on("data", (c: Buffer) => {
      seen = Buffer.concat([seen, c]);
      // The client's HEADERS frame (type 1) on stream 1 follows its 24-byte preface and SETTINGS.
      if (answered || !seen.includes(Buffer.from([0x01, 0x05, 0x00, 0x00, 0x00, 0x01])) && !seen.includes(Buffer.from([0x01, 0x04, 0x00, 0x00, 0x00, 0x01]))) return;
      answered = true;
      sock.write(frame(0x4, 0x1, 0, Buffer.alloc(0)));
      // HPACK: literal without indexing, name = static index 8 (:status), then the raw value.
      sock.write(frame(0x1, 0x5, 1, Buffer.concat([Buffer.from([0x08, status.length]), Buffer.from(status)])));
    });
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  return (server.address() as net.AddressInfo).port;
}

test.each(["600", "99", "abc"])("an h2c guest answering :status %s fails the exchange, not the process", async (status) => {
  const port = await rawH2(status);
  const sock = net.connect(port, "127.0.0.1");
  await new Promise<void>((r) => sock.once("connect", () => r()));
  const res = forwardHttp2(sock, {
    method: "GET",
    path: "/",
    authority: "3000-sb-x.example",
    headers: {},
    body: null,
    onBytesIn: () => undefined,
    onBytesOut: () => undefined,
    signal: new AbortController().signal,
  });
  const err = await res.catch((e: unknown) => e);
  // (The proxy destroys the tunnel and answers 502 on any rejection.)
  expect(err).toBeInstanceOf(Error);
  sock.destroy();
});
