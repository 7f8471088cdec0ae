// Issue 17 case 8, second half: a guest that answers the relayed WebSocket handshake with a status no Response can
// carry (99, 600, a 1xx other than 101) made `new Response(…, {status})` throw inside the relay, and the client got
// Bun's development page. Now the client gets a 502 envelope; a refusal the guest may legitimately send (403) is
// still passed on as itself.
import { afterAll, beforeAll, expect, test } from "bun:test";
import net from "node:net";
import { Sandbox } from "e2b";
import { DOMAIN, sdkOpts, startStack, type Stack } from "../e2b/harness.ts";
import { envelopeOf, leaks, rawRequest } from "./raw.ts";

let s: Stack;
let guest: net.Server;
let host: string;
let token: string;
// The status line the raw guest answers every upgrade with, set per case.
let statusLine = "HTTP/1.1 600 Odd";

beforeAll(async () => {
  s = await startStack({ proxy: true });
  guest = net.createServer((sock) => {
    sock.on("error", () => sock.destroy());
    sock.once("data", () => sock.end(`${statusLine}\r\nContent-Length: 0\r\n\r\n`));
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

test("a guest's 403 to the handshake reaches the client as a 403 envelope", async () => {
  statusLine = "HTTP/1.1 403 Forbidden";
  const r = await upgrade();
  expect(r.status).toBe(403);
  expect(envelopeOf(r.body)).toEqual({ code: 403, message: "the guest refused the WebSocket upgrade (403)" });
});
