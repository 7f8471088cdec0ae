// Issue 17 case 8, second half: a guest that answers the relayed WebSocket handshake with a status no Response can
// carry (99, 600, a 1xx other than 101) made `new Response(…, {status})` throw inside the relay, and the client got
// Bun's development page. Now the client gets a 502 envelope; a refusal the guest may legitimately send (403) is
// still passed on as itself. The guest's handshake head goes through the relay's one framing parser
// (shared/relay/framing): a hostile head (endless headers, bare LF line ends, a NUL, an obs-fold) is a 502 envelope
// at once, never an upgrade and never a wait for the handshake deadline.
import { afterAll, beforeAll, expect, test } from "bun:test";
import net from "node:net";
import { Sandbox } from "e2b";
import { DOMAIN, sdkOpts, startStack, type Stack } from "../e2b/harness.ts";
import { envelopeOf, leaks, rawRequest } from "./raw.ts";

let s: Stack;
let guest: net.Server;
let host: string;
let token: string;
// The status line the raw guest answers every upgrade with, set per case; `answer` replaces the whole reply.
let statusLine = "HTTP/1.1 600 Odd";
let answer: ((sock: net.Socket) => void) | undefined;

beforeAll(async () => {
  s = await startStack({ proxy: true });
  guest = net.createServer((sock) => {
    sock.on("error", () => sock.destroy());
    sock.once("data", () => (answer ? answer(sock) : sock.end(`${statusLine}\r\nContent-Length: 0\r\n\r\n`)));
  });
  await new Promise<void>((r) => guest.listen(0, "127.0.0.1", () => r()));
  const sbx = await Sandbox.create("base", sdkOpts(s));
  s.cluster.nodes[0]!.attachGuest(sbx.sandboxId.replace("sb-", "sb_"), 3000, (guest.address() as net.AddressInfo).port);
  host = `3000-${sbx.sandboxId}.${DOMAIN}`;
  token = (sbx as unknown as { envdAccessToken: string }).envdAccessToken;
}, 60_000);
afterAll(async () => {
  guest.close();
  await s.stop();
});

const upgrade = () =>
  rawRequest(
    Number(new URL(s.proxyUrl!).port),
    `GET /socket HTTP/1.1\r\nHost: ${host}\r\nX-Access-Token: ${token}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13`,
  );

for (const line of ["HTTP/1.1 099 Below", "HTTP/1.1 600 Above", "HTTP/1.1 100 Continue", "HTTP/1.1 102 Processing", "HTTP/1.1 199 Odd", "HTTP/1.1 99 Short"]) {
  test(`a guest answering the handshake with "${line}" gives the client a 502 envelope`, async () => {
    statusLine = line;
    const r = await upgrade();
    expect(leaks(r.raw)).toEqual([]);
    expect(r.status).toBe(502);
    expect(envelopeOf(r.body)?.code).toBe(502);
  });
}

/** Header lines for as long as the relay reads them: the guest stops only when the relay drops the tunnel. */
function endlessHeaders(sock: net.Socket): void {
  let n = 0;
  const pump = () => {
    while (!sock.destroyed && sock.write(`X-Filler-${n++}: ${"v".repeat(40)}\r\n`));
    if (!sock.destroyed) sock.once("drain", pump);
  };
  sock.write("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n");
  pump();
}

const switching = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n";
const hostile: Array<[string, (sock: net.Socket) => void]> = [
  ["endless header lines", endlessHeaders],
  ["bare LF line ends", (sock) => sock.write("HTTP/1.1 101 Switching Protocols\nUpgrade: websocket\nConnection: Upgrade\n\n")],
  ["a NUL in a header of a 101", (sock) => sock.write(`${switching}X-Odd: a\u0000b\r\n\r\n`)],
  ["an obs-fold continuation in a 101", (sock) => sock.write(`${switching}X-Odd: a\r\n folded\r\n\r\n`)],
  ["status 99 with a 101's headers", (sock) => sock.write("HTTP/1.1 99 Switching\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")],
];
for (const [what, reply] of hostile) {
  test(`a guest answering the handshake with ${what} gives the client a 502 envelope, not an upgrade`, async () => {
    answer = reply;
    try {
      const r = await upgrade();
      expect(leaks(r.raw)).toEqual([]);
      expect(r.status).toBe(502);
      expect(envelopeOf(r.body)).toEqual({ code: 502, message: "sandbox unreachable" });
    } finally {
      answer = undefined;
    }
  });
}

test("a guest's 403 to the handshake reaches the client as a 403 envelope", async () => {
  statusLine = "HTTP/1.1 403 Forbidden";
  const r = await upgrade();
  expect(r.status).toBe(403);
  expect(envelopeOf(r.body)).toEqual({ code: 403, message: "the guest refused the WebSocket upgrade (403)" });
});
