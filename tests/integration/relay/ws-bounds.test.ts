// Issue 17 case 3: a relayed WebSocket is bounded both ways. A guest that never reads holds the client back instead
// of filling the proxy; a 16 MiB frame (the cap) is reassembled in linear time, one byte more closes 1009; a message the client cannot take is
// a close code, never a silent loss. sandbox-e2b runs as its own process so its RSS and CPU time are its own.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { encodeFrame, WS_MAX_MESSAGE_BYTES } from "#shared/relay/ws-frames.ts";
import { e2bProcessFixture, peakRss, spawnE2b, type Child, type E2bProcessFixture } from "../e2b/process.ts";
import { waitFor } from "#tests/support/wait.ts";
import { cpuSeconds, createSandbox, gauge, rawWsClient, serverFrameHead, startHostileGuest, writeAll, type HostileGuest, e2bListeners } from "./hostile.ts";

const ROOT = "root-wsb";
const DOMAIN = "wsb.test";
const KEY = "e2b_wsbwsbwsbwsbwsb";
const MiB = 1024 * 1024;
let fixture: E2bProcessFixture;
let child: Child;
let api = "";
let proxyPort = 0;
let proxyUrl = "";
/** The process's metrics listener: the proxy's gauges are served there only. */
let metricsUrl = "";
let deaf: HostileGuest;
let talker: HostileGuest;

beforeAll(async () => {
  deaf = await startHostileGuest("deaf-ws");
  talker = await startHostileGuest("ws");
  fixture = await e2bProcessFixture({ rootToken: ROOT, apiKey: KEY, domain: DOMAIN });
  child = spawnE2b([...fixture.args, "--metrics-bind-address=127.0.0.1:0"]);
  ({ api, proxyPort, proxyUrl, metricsUrl } = await e2bListeners(child));
});
// Guests first: their sockets close the tunnels, so the proxy has no open stream to drain on SIGTERM.
afterAll(async () => {
  await deaf?.stop();
  await talker?.stop();
  await child?.stop();
  await fixture?.stop();
}, 30_000);

async function sandboxWith(guest: HostileGuest): Promise<{ host: string; token: string }> {
  const sbx = await createSandbox(api, KEY);
  fixture.cluster.nodes[0]!.attachGuest(sbx.claimId, 3000, guest.port);
  return { host: `3000-${sbx.id}.${DOMAIN}`, token: sbx.token };
}

test("a guest that never reads: the client sending 300 MiB is held back (or closed 1008/1009), and the proxy's RSS stays bounded", async () => {
  const { host, token } = await sandboxWith(deaf);
  const before = await peakRss(child.proc.pid);
  const c = await rawWsClient(proxyPort, host, token);
  expect(c.status).toBe(101);
  const frame = encodeFrame(2, Buffer.alloc(MiB, 5));
  let written = 0;
  // Write until 300 MiB went out, the proxy closed us, or the socket has not drained for 3 s (held back).
  for (; written < 300 * MiB && c.closeCode === undefined; written += MiB) {
    if (c.sock.write(frame)) continue;
    const drained = await Promise.race([new Promise<boolean>((r) => c.sock.once("drain", () => r(true))), Bun.sleep(3_000).then(() => false)]);
    if (!drained) break;
  }
  const after = await peakRss(child.proc.pid);
  const grewMb = (after - before) / MiB;
  console.log(`deaf guest: client wrote ${(written / MiB).toFixed(0)} MiB before it was held back, close=${c.closeCode ?? "none"}; proxy peak RSS +${grewMb.toFixed(1)} MB`);
  // The proxy holds at most a message or two toward the guest (1 MiB each) plus socket buffers.
  expect(grewMb).toBeLessThan(96);
  const heldBack = written < 300 * MiB;
  const closedTooBig = c.closeCode === 1008 || c.closeCode === 1009;
  expect(heldBack || closedTooBig).toBe(true);
  c.sock.destroy();
}, 90_000);

test("an 8 MiB and a 16 MiB frame (the cap) from the guest arrive whole, in linear time, while the proxy keeps answering", async () => {
  const { host, token } = await sandboxWith(talker);
  const seen = talker.upgraded.length;
  const c = await rawWsClient(proxyPort, host, token);
  expect(c.status).toBe(101);
  await waitFor("the guest's side of the WebSocket", () => talker.upgraded.length > seen);
  const guestSock = talker.upgraded.at(-1)!;
  for (const size of [8 * MiB, WS_MAX_MESSAGE_BYTES]) {
    const payload = Buffer.alloc(size, 3);
    payload.writeUInt32BE(size, 0);
    payload.writeUInt32BE(0xfeedface, size - 4);
    const cpu0 = await cpuSeconds(child.proc.pid);
    const t0 = performance.now();
    let slowest = 0;
    let polling = true;
    // A concurrent request to the same process while the frame is in flight.
    const poll = (async () => {
      while (polling) {
        const s = performance.now();
        await fetch(`${proxyUrl}/healthz`);
        slowest = Math.max(slowest, performance.now() - s);
        await Bun.sleep(20);
      }
    })();
    const had = c.messages.length;
    await writeAll(guestSock, Buffer.concat([serverFrameHead(2, size), payload]));
    await waitFor(`the ${size / MiB} MiB message at the client`, () => c.messages.length > had || c.closeCode !== undefined, 60_000, 20);
    polling = false;
    await poll;
    const cpu = (await cpuSeconds(child.proc.pid)) - cpu0;
    console.log(`${size / MiB} MiB frame: ${(performance.now() - t0).toFixed(0)} ms end to end, proxy CPU ${cpu.toFixed(2)} s, slowest /healthz ${slowest.toFixed(0)} ms`);
    expect(c.closeCode).toBeUndefined();
    const got = c.messages.at(-1)!;
    expect(got.length).toBe(size);
    expect(got.readUInt32BE(0)).toBe(size);
    expect(got.readUInt32BE(size - 4)).toBe(0xfeedface);
    // Linear: ~4 ms of proxy CPU per MiB relayed (0.12 s for 32 MiB, 0.22 s for 64 before the cap was 16). Joining on every read was
    // quadratic: 2.2 s for 32 MiB (68 ms per MiB), and the /healthz beside it waited 1.9 s.
    expect(cpu).toBeLessThan((size / MiB) * 0.025);
    expect(slowest).toBeLessThan(1_500);
  }
  c.sock.destroy();
}, 180_000);

test("issue 17: a frame one byte over the 16 MiB cap closes the client 1009 at its header, before the proxy holds it", async () => {
  const { host, token } = await sandboxWith(talker);
  const seen = talker.upgraded.length;
  const c = await rawWsClient(proxyPort, host, token);
  expect(c.status).toBe(101);
  await waitFor("the guest's side of the WebSocket", () => talker.upgraded.length > seen);
  const guestSock = talker.upgraded.at(-1)!;
  // The header alone declares the size: the proxy refuses it without waiting for (or allocating) the payload.
  guestSock.write(serverFrameHead(2, WS_MAX_MESSAGE_BYTES + 1));
  await waitFor("the client's close", () => c.closeCode !== undefined, 10_000, 20);
  expect(c.closeCode).toBe(1009);
  expect(c.messages.length).toBe(0);
  c.sock.destroy();
}, 30_000);

test("issue 17: a client message at the 1 MiB cap reaches the guest; one byte more closes the client 1009", async () => {
  const { host, token } = await sandboxWith(talker);
  const seen = talker.upgraded.length;
  const c = await rawWsClient(proxyPort, host, token);
  expect(c.status).toBe(101);
  await waitFor("the guest's side of the WebSocket", () => talker.upgraded.length > seen);
  const guestSock = talker.upgraded.at(-1)!;
  let got = 0;
  guestSock.on("data", (b: Buffer) => void (got += b.length));
  // The stated cap (docs/envd-relay.md "Bounds"), not the constant: a larger one breaks the worst-case sum.
  c.sock.write(encodeFrame(2, Buffer.alloc(MiB, 4)));
  await waitFor("the 1 MiB message at the guest", () => got >= MiB, 10_000, 20);
  c.sock.write(encodeFrame(2, Buffer.alloc(MiB + 1, 4)));
  await waitFor("the client's close", () => c.closeCode !== undefined, 10_000, 20);
  expect(c.closeCode).toBe(1009);
  c.sock.destroy();
}, 30_000);

test("a client that stops reading loses no message: every message arrives in order, or the proxy closes 1008/1009", async () => {
  const { host, token } = await sandboxWith(talker);
  const seen = talker.upgraded.length;
  const c = await rawWsClient(proxyPort, host, token);
  expect(c.status).toBe(101);
  await waitFor("the guest's side of the WebSocket", () => talker.upgraded.length > seen);
  const guestSock = talker.upgraded.at(-1)!;
  c.sock.pause(); // the client stops reading
  // A message as large as the cap (and Bun's send buffer limit), then many small ones in the same reads: after the
  // big one the client's buffer is full, and each further send() must wait for drain instead of being dropped.
  const BIG = WS_MAX_MESSAGE_BYTES;
  const N = 20_000;
  const SMALL = 60;
  const big = Buffer.alloc(BIG, 1);
  big.writeUInt32BE(0, 0);
  const parts: Buffer[] = [serverFrameHead(2, BIG), big];
  for (let i = 1; i < N; i++) {
    const m = Buffer.alloc(SMALL, 2);
    m.writeUInt32BE(i, 0);
    parts.push(serverFrameHead(2, SMALL), m);
  }
  const burst = Buffer.concat(parts);
  let guestDone = false;
  const writing = writeAll(guestSock, burst).then(() => void (guestDone = true));
  // Let every buffer between the guest and the paused client fill, then read again.
  let last = -1;
  let progress = 0;
  for (let i = 0; i < 20 && !guestDone; i++) {
    await Bun.sleep(250);
    progress = guestSock.bytesWritten;
    if (progress === last) break;
    last = progress;
  }
  c.sock.resume();
  // Until every message or a close arrived, or nothing more came for 5 s (lost messages never come).
  let count = -1;
  let quietSince = performance.now();
  await waitFor("every message, a close, or 5 s of silence", () => {
    if (c.messages.length !== count) [count, quietSince] = [c.messages.length, performance.now()];
    return c.messages.length === N || c.closeCode !== undefined || performance.now() - quietSince > 5_000;
  }, 60_000, 20);
  await Promise.race([writing, Bun.sleep(2_000)]);
  const indices = c.messages.map((m) => m.readUInt32BE(0));
  const gaps = indices.filter((v, i) => v !== i).length;
  console.log(`paused client: ${c.messages.length} of ${N} messages, ${gaps} out of place, close=${c.closeCode ?? "none"}`);
  expect(gaps).toBe(0);
  if (c.messages.length < N) expect([1008, 1009]).toContain(c.closeCode as number);
  else expect(indices.at(-1)).toBe(N - 1);
  c.sock.destroy();
}, 120_000);

// The deaf guest's client left while the proxy had it paused (a paused socket reads nothing, so it sees no close
// until the proxy pings it).
test("once the WebSocket clients are gone, every gauge is back at idle (tunnels, relays, buffered bytes)", async () => {
  await waitFor(
    "idle gauges",
    async () =>
      (await gauge(metricsUrl, "sandbox_envd_proxy_open_tunnels")) === 0 &&
      (await gauge(metricsUrl, "sandbox_envd_proxy_active_relays")) === 0 &&
      (await gauge(metricsUrl, "sandbox_envd_proxy_buffered_bytes")) === 0,
    15_000,
    100,
  );
  // The node's side too (the deaf guest's own socket is paused, so only the talking guest can tell).
  await waitFor("the talking guest's connections closed", () => talker.open() === 0, 5_000, 20);
});
