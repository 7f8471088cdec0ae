// Issue 17 case 6 on the chart's deployment shape: the real sandbox-envd-proxy process on a real kube-apiserver,
// whose NodeInventory does not list the new sandboxes yet (vk-sandbox publishes every 30 s). While an anonymous loop
// sends junk lookups, 20 freshly claimed sandboxes are used with the tokens the e2b surface issues for them: all 20
// answer, and not one root read for a junk id reaches the node. And a loaded node (issue 27): a fresh sandbox whose
// node takes 1.5 s to answer the probe is relayed, not answered "sandbox was not found" (the SDKs take that as gone);
// a node that fails the probe answers "sandbox unavailable" (state unknown) and is not remembered as a miss.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { applyInventory, vouchingNode } from "#tests/kube/nodes.ts";
import { startKubeFixture, type KubeFixture } from "../vk-sandbox/kube-fixture.ts";
import { startSandboxdSim, type SandboxdSim } from "#services/sandboxd-sim/sim.ts";
import { SandboxdClient } from "#shared/sandboxd/client.ts";
import { envdAccessToken } from "#shared/e2b/tokens.ts";
import { startTestGuest, type TestGuest } from "../e2b/guest.ts";
import { spawnService } from "../e2b/process.ts";
import { until } from "#tests/support/wait.ts";

const ROOT = "root-proxy-lane";
const SECRET = "proxy-lane-secret";
const DOMAIN = "lane.test";
const hex = (bytes: number) => randomBytes(bytes).toString("hex");

let kube: KubeFixture;
let sim: SandboxdSim;
let guest: TestGuest;
let dir: string;

beforeAll(async () => {
  kube = await startKubeFixture({ crd: true });
  sim = await startSandboxdSim({ rootToken: ROOT, pools: ["img/none/small=22"] });
  guest = await startTestGuest();
  sim.attachGuest("*", 49983, guest.port);
  dir = mkdtempSync(join(tmpdir(), "envd-proxy-lane-"));
  writeFileSync(join(dir, "secret"), SECRET);
  writeFileSync(join(dir, "token"), `${ROOT}\n`);
}, 180_000);
afterAll(async () => {
  await guest?.stop();
  await sim?.stop();
  await kube?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("sandbox-envd-proxy: the probe lane under anonymous junk", () => {
  test("20 fresh, unpublished sandboxes all answer on first use; no junk lookup reads from the node", async () => {
    // The node is published and fresh, with none of the new sandboxes in its entries yet; its Node vouches for the
    // address (shared/fleet/trust.ts).
    await vouchingNode(kube.cluster, "node-lane", sim.addr);
    await applyInventory(kube.cluster, { node: "node-lane", address: sim.addr, entries: [] });
    const p = spawnService(
      "sandbox-envd-proxy",
      ["--bind-address=127.0.0.1:0", `--domain=${DOMAIN}`, `--e2b-envd-secret-file=${join(dir, "secret")}`, `--sandboxd-token-file=${join(dir, "token")}`],
      { KUBECONFIG: kube.cluster.kubeconfig() },
    );
    const junkIds = new Set<string>();
    let junkSent = 0;
    let stop = false;
    try {
      const port = Number((await p.waitFor("envd proxy listening")).port);
      const ask = (id: string, token: string) => fetch(`http://127.0.0.1:${port}/echo`, { headers: { host: `49983-${id.replace("sb_", "sb-")}.${DOMAIN}`, "x-access-token": token } });
      const junk = async () => {
        while (!stop) {
          const id = `sb_${hex(8)}`;
          junkIds.add(id);
          const token = junkSent % 3 === 0 ? hex(32) : junkSent % 3 === 1 ? hex(48) : "junk";
          junkSent++;
          await ask(id, token).then((r) => r.arrayBuffer()).catch(() => undefined);
        }
      };
      const loops = Array.from({ length: 16 }, junk);
      try {
        await until(() => junkSent > 500, "the junk loop to get going", 30_000, 10);
        const client = new SandboxdClient({ baseUrl: sim.url, token: ROOT });
        const claims = await Promise.all(Array.from({ length: 20 }, (_, i) => client.claim({ template: "img", claim_ref: `team-a/e2b-lane-${i}` })));
        const firsts = await Promise.all(claims.map((c) => ask(c.id, envdAccessToken(SECRET, c.id, c.token)).then((r) => r.status)));
        expect(firsts).toEqual(Array(20).fill(200));
      } finally {
        stop = true;
        await Promise.all(loops);
      }
      const junkReads = sim.requests.filter((e) => e.route === "get" && [...junkIds].some((id) => e.path.includes(id)));
      expect(junkReads).toHaveLength(0);
      expect(junkSent).toBeGreaterThan(500);
    } finally {
      await p.stop();
    }
  }, 120_000);

  test("a fresh sandbox on a slow node is relayed once the node answers; a failing node reads as unavailable, never as not found", async () => {
    const p = spawnService(
      "sandbox-envd-proxy",
      ["--bind-address=127.0.0.1:0", `--domain=${DOMAIN}`, `--e2b-envd-secret-file=${join(dir, "secret")}`, `--sandboxd-token-file=${join(dir, "token")}`],
      { KUBECONFIG: kube.cluster.kubeconfig() },
    );
    try {
      const port = Number((await p.waitFor("envd proxy listening")).port);
      const ask = (id: string, token: string) => fetch(`http://127.0.0.1:${port}/echo`, { headers: { host: `49983-${id.replace("sb_", "sb-")}.${DOMAIN}`, "x-access-token": token } });
      const client = new SandboxdClient({ baseUrl: sim.url, token: ROOT });
      const slow = await client.claim({ template: "img", claim_ref: "team-a/e2b-slow" });
      // The node's root read takes 1.5 s (a loaded node): three times upstream's 500 ms probe budget.
      sim.latency("get", 1_500);
      const started = performance.now();
      const r = await ask(slow.id, envdAccessToken(SECRET, slow.id, slow.token));
      expect(r.status).toBe(200);
      await r.arrayBuffer();
      expect(performance.now() - started).toBeGreaterThanOrEqual(1_500);
      sim.latency("get", null);

      const failing = await client.claim({ template: "img", claim_ref: "team-a/e2b-failing" });
      const token = envdAccessToken(SECRET, failing.id, failing.token);
      sim.fail("get", 500, undefined, 1);
      const unavailable = await ask(failing.id, token);
      expect(unavailable.status).toBe(502);
      expect(await unavailable.json()).toEqual({ code: 502, message: "sandbox unavailable" });
      // Not remembered as a miss: the next request probes again and reaches it.
      const again = await ask(failing.id, token);
      expect(again.status).toBe(200);
      await again.arrayBuffer();
    } finally {
      sim.clearFaults();
      await p.stop();
    }
  }, 120_000);
});
