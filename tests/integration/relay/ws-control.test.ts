// Control frames from a guest are bounded (security review of issue 17's WebSocket relay): RFC 6455 §5.5 caps a
// ping, pong or close at 125 bytes, unfragmented. Before, the relay took a 16 MiB "ping" from a guest that never
// reads and queued a 16 MiB pong toward it, per ping, outside every budget: a handful of connections crossed the
// chart's 512Mi. Now such a frame closes the client with 1002, and a flood of small pings toward a guest that does
// not read queues no pongs. sandbox-e2b runs as its own process so its RSS is its own.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { currentRss, e2bProcessFixture, peakRss, spawnE2b, type Child, type E2bProcessFixture } from "../e2b/process.ts";
import { waitFor } from "#tests/support/wait.ts";
import { createSandbox, rawWsClient, serverFrameHead, startHostileGuest, writeAll, type HostileGuest } from "./hostile.ts";

const ROOT = "root-wsc";
const DOMAIN = "wsc.test";
const KEY = "e2b_wscwscwscwscwsc";
const MiB = 1024 * 1024;
let fixture: E2bProcessFixture;
let child: Child;
let api = "";
let proxyPort = 0;
let deaf: HostileGuest;

beforeAll(async () => {
  deaf = await startHostileGuest("deaf-ws");
  fixture = await e2bProcessFixture({ rootToken: ROOT, apiKey: KEY, domain: DOMAIN });
  child = spawnE2b(fixture.args);
  api = `http://127.0.0.1:${(await child.waitFor("e2b surface listening")).port}`;
  proxyPort = Number((await child.waitFor("envd proxy listening")).port);
});
afterAll(async () => {
  await deaf?.stop();
  await child?.stop();
  await fixture?.stop();
}, 30_000);

async function deafSocket() {
  const sbx = await createSandbox(api, KEY);
  fixture.cluster.nodes[0]!.attachGuest(sbx.claimId, 3000, deaf.port);
  const seen = deaf.upgraded.length;
  const c = await rawWsClient(proxyPort, `3000-${sbx.id}.${DOMAIN}`, sbx.token);
  expect(c.status).toBe(101);
  await waitFor("the guest's side of the WebSocket", () => deaf.upgraded.length > seen);
  return { c, guest: deaf.upgraded.at(-1)! };
}

test("a 16 MiB ping from a guest that never reads closes the client with 1002; six of them on four connections hold no pongs", async () => {
  const before = await peakRss(child.proc.pid);
  const pairs: Awaited<ReturnType<typeof deafSocket>>[] = [];
  for (let i = 0; i < 4; i++) pairs.push(await deafSocket()); // one at a time: each takes the newest guest socket
  const big = Buffer.alloc(16 * MiB, 7);
  // Not awaited: once the proxy refuses the first header it reads no more, and a paused socket never drains.
  const frame = Buffer.concat([serverFrameHead(9, big.length), big]);
  for (const { guest } of pairs) for (let i = 0; i < 6; i++) guest.write(frame, () => undefined);
  for (const { c } of pairs) await waitFor(`the client's close frame; proxy output:\n${child.output().slice(-3000)}`, () => c.closeCode !== undefined, 15_000);
  expect(pairs.map(({ c }) => c.closeCode)).toEqual([1002, 1002, 1002, 1002]);
  const grewMb = (await peakRss(child.proc.pid) - before) / MiB;
  console.log(`4 connections x up to 6 pings of 16 MiB: proxy peak RSS +${grewMb.toFixed(1)} MB`);
  // The frame is refused at its header, before its payload is held: what remains is socket buffers.
  expect(grewMb).toBeLessThan(64);
  for (const { c, guest } of pairs) {
    c.sock.destroy();
    guest.destroy();
  }
}, 90_000);

test("a fragmented ping is a protocol error too (1002)", async () => {
  const { c, guest } = await deafSocket();
  guest.write(Buffer.concat([serverFrameHead(9, 4, false), Buffer.from("ping")]));
  await waitFor("the client's close frame", () => c.closeCode !== undefined, 15_000);
  expect(c.closeCode).toBe(1002);
  c.sock.destroy();
});

test("400,000 small pings (50 MB) toward a guest that never reads queue no pongs behind each other: the proxy's RSS stays flat and the WebSocket stays open", async () => {
  const { c, guest } = await deafSocket();
  const before = await currentRss(child.proc.pid); // not the peak: the 16 MiB test above already raised it
  const ping = Buffer.concat([serverFrameHead(9, 125), Buffer.alloc(125, 1)]);
  const batch = Buffer.concat(Array.from({ length: 10_000 }, () => ping));
  for (let i = 0; i < 40; i++) await writeAll(guest, batch);
  // The proxy has read them all once the guest's socket has nothing left to send.
  await waitFor("the proxy to read every ping", () => guest.writableLength === 0, 30_000);
  const grewMb = (await currentRss(child.proc.pid) - before) / MiB;
  console.log(`400,000 pings of 125 bytes toward a deaf guest: proxy RSS +${grewMb.toFixed(1)} MB`);
  // One pong per ping would queue 50 MB toward the guest (it reads nothing); answering only when the tunnel is
  // drained holds at most a kernel socket buffer's worth.
  expect(grewMb).toBeLessThan(40); // measured: ~18 MB (reading 50 MB of pings); one pong per ping: +69 MB
  expect(c.closeCode).toBeUndefined();
  c.sock.destroy();
}, 90_000);
