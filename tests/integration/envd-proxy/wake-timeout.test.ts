// Issue 28 item 5's bound, end to end: the sandbox-envd-proxy binary on a real kube-apiserver (the sandbox published
// Hibernated in its NodeInventory, as vk-sandbox publishes a sleeping one) in front of the simulator, whose slowWake
// knob makes the node's wake slower than the proxy's --wake-timeout (on the node's test clock, so the wake ends when the
// test moves it). Every request held on that wake is answered at
// the bound (504, saying the sandbox did not wake in time) while the node is still waking it, none hangs, the tenant's
// relay slots are free again at once, and once the node's wake completes the next request is served (one wake).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startKubeFixture, type KubeFixture } from "../vk-sandbox/kube-fixture.ts";
import { applyInventory, vouchingNode } from "#tests/kube/nodes.ts";
import { startSandboxdSim, type SandboxdSim } from "#services/sandboxd-sim/sim.ts";
import { SandboxdClient } from "#shared/sandboxd/client.ts";
import { deriveAccessToken } from "#shared/e2b/tokens.ts";
import { until } from "#tests/support/wait.ts";
import { startTestGuest, type TestGuest } from "../e2b/guest.ts";
import { spawnService, type Child } from "../e2b/process.ts";

const ROOT = "root-proxy-wake";
const SECRET = "proxy-wake-secret";
const DOMAIN = "wake.test";
/** Three requests wait on the wake: exactly the tenant's cap, so one slot left held would refuse the next request. */
const CAP = 3;

let kube: KubeFixture;
let sim: SandboxdSim;
let guest: TestGuest;
let dir: string;
let proxy: Child;
let port: number;
let metricsPort: number;

beforeAll(async () => {
  kube = await startKubeFixture({ crd: true });
  // The node's clock is a test clock: its wake ends when the test says so, whatever the machine's load.
  sim = await startSandboxdSim({ rootToken: ROOT, pools: ["img/none/small=4"], clock: "fake" });
  guest = await startTestGuest();
  sim.attachGuest("*", 49983, guest.port);
  dir = mkdtempSync(join(tmpdir(), "envd-proxy-wake-"));
  writeFileSync(join(dir, "secret"), SECRET);
  writeFileSync(join(dir, "token"), `${ROOT}\n`);
}, 180_000);
afterAll(async () => {
  await proxy?.stop();
  await guest?.stop();
  await sim?.stop();
  await kube?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const metric = async (name: string): Promise<number> => {
  const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  return Number(new RegExp(`^${name.replace(/[{}"]/g, "\\$&")} (\\S+)$`, "m").exec(text)?.[1] ?? 0);
};

describe("sandbox-envd-proxy --wake-timeout", () => {
  test("a wake slower than the bound: 504 that says so for every held request, slots freed, the next request after the wake served", async () => {
    const client = new SandboxdClient({ baseUrl: sim.url, token: ROOT });
    const asleep = await client.claim({ template: "img", claim_ref: "team-w/asleep" });
    const awake = await client.claim({ template: "img", claim_ref: "team-w/awake" });
    sim.hibernate(asleep.id);
    await vouchingNode(kube.cluster, "node-wake", sim.addr);
    await applyInventory(kube.cluster, {
      node: "node-wake",
      address: sim.addr,
      entries: [
        { id: asleep.id, name: "team-w/asleep", phase: "Hibernated" },
        { id: awake.id, name: "team-w/awake", phase: "Running" },
      ],
    });
    proxy = spawnService(
      "sandbox-envd-proxy",
      [
        "--bind-address=127.0.0.1:0",
        `--domain=${DOMAIN}`,
        "--namespace=",
        `--e2b-envd-secret-file=${join(dir, "secret")}`,
        `--sandboxd-token-file=${join(dir, "token")}`,
        "--metrics-bind-address=127.0.0.1:0",
        "--wake-timeout=1s",
        `--max-relays-per-namespace=${CAP}`,
      ],
      { KUBECONFIG: kube.cluster.kubeconfig() },
    );
    port = Number((await proxy.waitFor("envd proxy listening")).port);
    metricsPort = Number((await proxy.waitFor("metrics listening")).port);
    const ask = (c: { id: string; token: string }) =>
      fetch(`http://127.0.0.1:${port}/echo`, {
        headers: { host: `49983-${c.id.replace("sb_", "sb-")}.${DOMAIN}`, "x-access-token": deriveAccessToken(SECRET, c.token) },
        // A guard only: a request the proxy never answers fails here instead of hanging the file.
        signal: AbortSignal.timeout(60_000),
      });
    const wakesOnNode = () => sim.node.counters.get("wakes_total") ?? 0;
    const nodeWakesBefore = wakesOnNode();

    // The node's wake takes 60 s of its clock, which stands still until the test moves it: longer than any bound.
    sim.slowWake(60_000);
    const answers = await Promise.all(Array.from({ length: CAP }, async () => {
      const r = await ask(asleep);
      return { status: r.status, body: (await r.json()) as unknown };
    }));
    // Every held request was answered while the node was still waking the sandbox: at the proxy's bound, not the wake's.
    expect(sim.node.waking(asleep.id)).toBe(true);
    expect(answers).toEqual(Array.from({ length: CAP }, () => ({ status: 504, body: { code: 504, message: "sandbox was asleep and did not wake in time (within 1s); retry later" } })));
    expect(await metric('sandbox_envd_proxy_wakes_total{outcome="timeout"}')).toBe(CAP);
    // The tenant's slots are free again: the cap is CAP, CAP requests timed out, and the tenant's running sandbox is
    // served at once (a slot still held would answer 429 "too many concurrent requests to this tenant's sandboxes").
    expect(await metric("sandbox_envd_proxy_active_relays")).toBe(0);
    const other = await ask(awake);
    expect(other.status).toBe(200);
    expect(((await other.json()) as { path: string }).path).toBe("/echo");

    // A Connect stream (the SDK's commands.run) held on the same wake gets Connect's own error in a 200 end-of-stream
    // message: connect-es reads an HTTP 504 as `unavailable`, which the JS SDK reports as a sandbox no longer running.
    const stream = await fetch(`http://127.0.0.1:${port}/process.Process/Start`, {
      method: "POST",
      headers: { host: `49983-${asleep.id.replace("sb_", "sb-")}.${DOMAIN}`, "x-access-token": deriveAccessToken(SECRET, asleep.token), "content-type": "application/connect+json", "connect-protocol-version": "1" },
      body: new Uint8Array(5),
      signal: AbortSignal.timeout(60_000),
    });
    expect([stream.status, stream.headers.get("content-type")]).toEqual([200, "application/connect+json"]);
    const frame = Buffer.from(await stream.arrayBuffer());
    expect(frame[0]).toBe(0x02); // end of stream
    expect(JSON.parse(frame.subarray(5, 5 + frame.readUInt32BE(1)).toString())).toEqual({ error: { code: "deadline_exceeded", message: "sandbox was asleep and did not wake in time (within 1s); retry later" } });
    expect(sim.node.waking(asleep.id)).toBe(true);

    // The node finishes its one wake.
    sim.advance(60_000);
    await until(() => sim.claims().find((c) => c.id === asleep.id)?.state === "running", "the node's wake to complete", 30_000, 20);
    expect(wakesOnNode() - nodeWakesBefore).toBe(1);
    // The connections the proxy gave up on hold nothing on the node: the sandbox's idle clock is not held open.
    await until(() => (sim.claims().find((c) => c.id === asleep.id)?.holds ?? 0) === 0, "no relay held on the node", 30_000, 20);
    // A later request is served (the view still says Hibernated: it is timed as a wake, and the node answers at once).
    const later = await ask(asleep);
    expect(later.status).toBe(200);
    expect(((await later.json()) as { path: string }).path).toBe("/echo");
    expect(await metric('sandbox_envd_proxy_wakes_total{outcome="ok"}')).toBe(1);
    expect(wakesOnNode() - nodeWakesBefore).toBe(1);
  }, 240_000);
});
