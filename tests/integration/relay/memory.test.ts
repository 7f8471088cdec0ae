// 200 MB each way through the relay in constant memory, measured on sandbox-e2b as its own process (Linux VmHWM,
// the peak resident set), so the client, the simulated node and the guest in this process do not blur the figure.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { Sandbox } from "e2b";
import { countedBytes, generatedBody } from "../e2b/guest.ts";
import { e2bProcessFixture, spawnE2b, peakRss, type Child, type E2bProcessFixture } from "../e2b/process.ts";

const ROOT = "root-mem";
const DOMAIN = "mem.test";
const KEY = "e2b_memmemmemmemmem";
let fixture: E2bProcessFixture;
let child: Child;
let apiUrl = "";
let proxyUrl = "";

beforeAll(async () => {
  fixture = await e2bProcessFixture({ rootToken: ROOT, apiKey: KEY, domain: DOMAIN });
  child = spawnE2b(fixture.args);
  apiUrl = `http://127.0.0.1:${(await child.waitFor("e2b surface listening")).port}`;
  proxyUrl = `http://127.0.0.1:${(await child.waitFor("envd proxy listening")).port}`;
});
afterAll(async () => {
  await child?.stop();
  await fixture?.stop();
});

test("22 + issue: a 200 MB upload and a 200 MB download through the relay raise the proxy's peak RSS by far less than one body", async () => {
  const sbx = await Sandbox.create("img", { apiKey: KEY, apiUrl, domain: DOMAIN });
  const token = (sbx as unknown as { envdAccessToken: string }).envdAccessToken;
  const headers = { host: `49983-${sbx.sandboxId}.${DOMAIN}`, "x-access-token": token };
  // Warm the path once so one-off allocations (TLS-free sockets, JIT) are not counted as growth.
  await (await fetch(`${proxyUrl}/download?size=${8 * 1024 * 1024}`, { headers })).arrayBuffer();
  const before = await peakRss(child.proc.pid);

  const SIZE = 200 * 1024 * 1024;
  const body = generatedBody(SIZE, 7);
  const up = await fetch(`${proxyUrl}/upload`, { method: "POST", headers, body, duplex: "half" } as RequestInit);
  expect(await up.json()).toEqual({ bytes: SIZE });
  const down = await fetch(`${proxyUrl}/download?size=${SIZE}`, { headers });
  expect(await countedBytes(down)).toBe(SIZE);

  const after = await peakRss(child.proc.pid);
  const grewMb = (after - before) / 1024 / 1024;
  console.log(`relay process peak RSS: ${(before / 1048576).toFixed(1)} MB before, ${(after / 1048576).toFixed(1)} MB after 200 MB up + 200 MB down (+${grewMb.toFixed(1)} MB)`);
  // Holding either body whole would add at least 200 MB; allocator and GC slack on a busy machine stays far below.
  expect(grewMb).toBeLessThan(100);
  await sbx.kill();
}, 120_000);
