// The h2c guest leg (--envd-proxy-guest-http2) streams a large body in bounded memory and holds the guest back when
// the client reads slowly: the queue (GUEST_BODY_QUEUE) and the HTTP/2 stream window are both 1 MiB
// (docs/envd-relay.md "Streaming"). sandbox-e2b runs as its own process so its peak RSS is its own.
import { afterAll, beforeAll, expect, test } from "bun:test";
import http2 from "node:http2";
import net from "node:net";
import { e2bProcessFixture, spawnE2b, peakRss, type Child, type E2bProcessFixture } from "../e2b/process.ts";

const ROOT = "root-h2c";
const DOMAIN = "h2c.test";
const KEY = "e2b_h2ch2ch2ch2ch2c";
let fixture: E2bProcessFixture;
let child: Child;
let api = "";
let proxyPort = 0;
let guest: http2.Http2Server;
let guestPort = 0;
/** Bytes the h2c guest has handed to its stream so far (res.write honours the peer's flow control). */
let written = 0;

beforeAll(async () => {
  const chunk = Buffer.alloc(64 * 1024, 98);
  guest = http2.createServer((req, res) => {
    const size = Number(new URL(req.url, "http://guest").searchParams.get("size") ?? "0");
    let sent = 0;
    const more = () => {
      while (sent < size) {
        const n = Math.min(chunk.length, size - sent);
        sent += n;
        written += n;
        if (!res.write(n === chunk.length ? chunk : chunk.subarray(0, n))) return void res.once("drain", more);
      }
      res.end();
    };
    res.on("error", () => undefined); // the client may go away mid-body
    more();
  });
  await new Promise<void>((r) => guest.listen(0, "127.0.0.1", () => r()));
  guestPort = (guest.address() as net.AddressInfo).port;
  fixture = await e2bProcessFixture({ rootToken: ROOT, apiKey: KEY, domain: DOMAIN });
  child = spawnE2b([...fixture.args, "--envd-proxy-guest-http2"]);
  api = `http://127.0.0.1:${(await child.waitFor("e2b surface listening")).port}`;
  proxyPort = Number((await child.waitFor("envd proxy listening")).port);
});
afterAll(async () => {
  await child?.stop();
  await fixture?.stop();
  guest?.close();
});

/** A sandbox whose port 49983 is the h2c guest; the request head for a download of `size` bytes from it. */
async function h2cSandbox(): Promise<(size: number) => string> {
  const r = await fetch(`${api}/v2/sandboxes`, { method: "POST", headers: { "x-api-key": KEY, "content-type": "application/json" }, body: '{"templateID":"img"}' });
  const sbx = (await r.json()) as { sandboxID: string; envdAccessToken: string };
  expect(r.status).toBe(201);
  fixture.cluster.nodes[0]!.attachGuest(sbx.sandboxID.replace("sb-", "sb_"), 49983, guestPort);
  return (size) => `GET /download?size=${size} HTTP/1.1\r\nHost: 49983-${sbx.sandboxID}.${DOMAIN}\r\nX-Access-Token: ${sbx.envdAccessToken}\r\nConnection: close\r\n\r\n`;
}

const dial = () =>
  new Promise<net.Socket>((resolve, reject) => {
    const s = net.connect({ host: "127.0.0.1", port: proxyPort }, () => resolve(s));
    s.once("error", reject);
  });

test("a 200 MB download from an h2c guest raises the proxy's peak RSS by far less than the body", async () => {
  const SIZE = 200 * 1024 * 1024;
  const head = await h2cSandbox();
  const read = async (size: number) => {
    const s = await dial();
    let n = 0;
    await new Promise<void>((resolve, reject) => {
      s.on("data", (c: Buffer) => void (n += c.length));
      s.once("error", reject);
      s.once("end", () => resolve());
      s.write(head(size));
    });
    s.destroy();
    return n;
  };
  expect(await read(8 * 1024 * 1024)).toBeGreaterThan(8 * 1024 * 1024); // warm the path once (JIT, one-off allocations)
  const before = await peakRss(child.proc.pid);
  // The response head plus at least the whole body arrived (Connection: close, so the body ends at end of stream).
  expect(await read(SIZE)).toBeGreaterThan(SIZE);
  const after = await peakRss(child.proc.pid);
  const grewMb = (after - before) / 1024 / 1024;
  console.log(`h2c guest leg: peak RSS +${grewMb.toFixed(1)} MB over a 200 MB download `);
  expect(grewMb).toBeLessThan(100);
}, 120_000);

test("a client that stops reading holds the h2c guest back; reading again gets the whole body", async () => {
  const SIZE = 200 * 1024 * 1024;
  const head = (await h2cSandbox())(SIZE);
  written = 0;
  const s = await dial();
  let got = 0;
  let ended = false;
  let slow = true;
  s.on("data", (c: Buffer) => {
    got += c.length;
    if (slow) s.pause(); // read one chunk, then stop
  });
  s.once("end", () => void (ended = true));
  s.write(head);
  // Let every buffer on the way (kernel socket buffers, the node's splice, the proxy's queue and window) fill up.
  let last = -1;
  for (let i = 0; i < 40 && written !== last; i++) {
    last = written;
    await Bun.sleep(250);
  }
  expect(written).toBe(last); // the guest has stopped: flow control reached it
  // What is held between guest and client is socket buffers plus the proxy's 1 MiB queue and 1 MiB window, far
  // below the body: without backpressure the guest would have written all 200 MB by now.
  console.log(`slow reader: client read ${got} B, guest wrote ${(written / 1048576).toFixed(1)} MB and stopped`);
  expect(written).toBeLessThan(64 * 1024 * 1024);
  slow = false;
  s.resume();
  await new Promise<void>((resolve) => (ended ? resolve() : s.once("end", () => resolve())));
  s.destroy();
  expect(written).toBe(SIZE);
  expect(got).toBeGreaterThan(SIZE);
}, 120_000);
