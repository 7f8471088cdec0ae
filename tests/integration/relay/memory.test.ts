// 200 MB each way through the relay in constant memory, measured on sandbox-e2b as its own process (Linux VmHWM,
// the peak resident set), so the client, the simulated node and the guest in this process do not blur the figure.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Sandbox } from "e2b";
import { startSimCluster, type SimCluster } from "#services/sandboxd-sim/sim.ts";
import { startTestGuest, type TestGuest } from "../e2b/guest.ts";
import { spawnE2b, peakRss, type Child } from "../e2b/process.ts";

const ROOT = "root-mem";
const DOMAIN = "mem.test";
const KEY = "e2b_memmemmemmemmem";
let cluster: SimCluster;
let guest: TestGuest;
let child: Child;
let dir: string;
let apiUrl = "";
let proxyUrl = "";

beforeAll(async () => {
  cluster = await startSimCluster(1, { rootToken: ROOT, pools: ["img/none/small=2"] });
  guest = await startTestGuest();
  cluster.nodes[0]!.attachGuest("*", 49983, guest.port);
  dir = mkdtempSync(join(tmpdir(), "e2b-mem-"));
  writeFileSync(join(dir, "secret"), "secret\n");
  writeFileSync(join(dir, "keys"), `${KEY}\n`);
  child = spawnE2b([
    `--sandboxd-seeds=${cluster.nodes[0]!.addr}`,
    `--sandboxd-token=${ROOT}`,
    "--e2b-bind-address=127.0.0.1:0",
    "--envd-proxy-bind-address=127.0.0.1:0",
    `--e2b-domain=${DOMAIN}`,
    `--e2b-envd-secret-file=${join(dir, "secret")}`,
    `--e2b-api-key-file=${join(dir, "keys")}`,
  ]);
  apiUrl = `http://127.0.0.1:${(await child.waitFor("e2b surface listening")).port}`;
  proxyUrl = `http://127.0.0.1:${(await child.waitFor("envd proxy listening")).port}`;
});
afterAll(async () => {
  await child?.stop();
  await guest?.stop();
  await cluster?.stop();
  rmSync(dir, { recursive: true, force: true });
});

test("22 + issue: a 200 MB upload and a 200 MB download through the relay raise the proxy's peak RSS by far less than one body", async () => {
  const sbx = await Sandbox.create("img", { apiKey: KEY, apiUrl, domain: DOMAIN });
  const token = (sbx as unknown as { envdAccessToken: string }).envdAccessToken;
  const headers = { host: `49983-${sbx.sandboxId}.${DOMAIN}`, "x-access-token": token };
  // Warm the path once so one-off allocations (TLS-free sockets, JIT) are not counted as growth.
  await (await fetch(`${proxyUrl}/download?size=${8 * 1024 * 1024}`, { headers })).arrayBuffer();
  const before = await peakRss(child.proc.pid);

  const SIZE = 200 * 1024 * 1024;
  const chunk = new Uint8Array(256 * 1024).fill(7);
  let sent = 0;
  const body = new ReadableStream<Uint8Array>({
    pull(ctrl) {
      if (sent >= SIZE) return ctrl.close();
      sent += chunk.byteLength;
      ctrl.enqueue(chunk);
    },
  });
  const up = await fetch(`${proxyUrl}/upload`, { method: "POST", headers, body, duplex: "half" } as RequestInit);
  expect(await up.json()).toEqual({ bytes: SIZE });
  const down = await fetch(`${proxyUrl}/download?size=${SIZE}`, { headers });
  let got = 0;
  for await (const c of down.body!) got += (c as Uint8Array).byteLength;
  expect(got).toBe(SIZE);

  const after = await peakRss(child.proc.pid);
  const grewMb = (after - before) / 1024 / 1024;
  console.log(`relay process peak RSS: ${(before / 1048576).toFixed(1)} MB before, ${(after / 1048576).toFixed(1)} MB after 200 MB up + 200 MB down (+${grewMb.toFixed(1)} MB)`);
  // Holding either body whole would add at least 200 MB; allocator and GC slack on a busy machine stays far below.
  expect(grewMb).toBeLessThan(100);
  await sbx.kill();
}, 120_000);
