// sandbox-envd-proxy as a real process on a real kube-apiserver: owners come from NodeInventory objects (the
// Kubernetes fleet source), staleness follows --inventory-stale-after, --namespace filters inventory lookups only,
// and a missing CRD fails startup naming it (in-process, so the wait can be shortened without a test hook).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startKubeFixture, type KubeFixture } from "../vk-sandbox/kube-fixture.ts";
import { applyInventory, vouchingNode } from "#tests/kube/nodes.ts";
import { startSandboxdSim, type SandboxdSim } from "#services/sandboxd-sim/sim.ts";
import { SandboxdClient } from "#shared/sandboxd/client.ts";
import { deriveAccessToken, envdAccessToken } from "#shared/e2b/tokens.ts";
import { startTestGuest, type TestGuest } from "../e2b/guest.ts";
import { spawnService, type Child } from "../e2b/process.ts";
import { StartupError } from "#shared/config/index.ts";
import { createLogger } from "#shared/log/index.ts";
import { parseEnvdProxyFlags } from "#services/sandbox-envd-proxy/flags.ts";
import { startEnvdProxy } from "#services/sandbox-envd-proxy/wire.ts";

const ROOT = "root-proxy-kube";
const SECRET = "proxy-secret";
const DOMAIN = "px.test";
const MAIN = join(import.meta.dir, "../../../services/sandbox-envd-proxy/main.ts");

let kube: KubeFixture;
let sim: SandboxdSim;
let guest: TestGuest;
let dir: string;
let kubeconfig: string;

beforeAll(async () => {
  kube = await startKubeFixture({ crd: true });
  sim = await startSandboxdSim({ rootToken: ROOT, pools: ["img/none/small=4"] });
  guest = await startTestGuest();
  sim.attachGuest("*", 49983, guest.port);
  dir = mkdtempSync(join(tmpdir(), "envd-proxy-"));
  writeFileSync(join(dir, "secret"), SECRET);
  writeFileSync(join(dir, "token"), `${ROOT}\n`);
  kubeconfig = kube.cluster.kubeconfig();
}, 180_000);
afterAll(async () => {
  await guest?.stop();
  await sim?.stop();
  await kube?.stop();
  rmSync(dir, { recursive: true, force: true });
});

function spawnProxy(extra: string[] = []): Child {
  return spawnService(
    "sandbox-envd-proxy",
    ["--bind-address=127.0.0.1:0", `--domain=${DOMAIN}`, `--e2b-envd-secret-file=${join(dir, "secret")}`, `--sandboxd-token-file=${join(dir, "token")}`, ...extra],
    { KUBECONFIG: kubeconfig },
  );
}

async function publish(name: string, entries: { id: string; name: string }[], publishedAt: Date): Promise<void> {
  await vouchingNode(kube.cluster, name, sim.addr);
  await applyInventory(kube.cluster, { node: name, address: sim.addr, publishedAt, entries: entries.map((e) => ({ ...e, phase: "Running" })) });
}

describe("sandbox-envd-proxy on NodeInventory", () => {
  test("a published sandbox is relayed; a node that trails the newest publishedAt by more than the window answers 502; --namespace filters inventory but not probes", async () => {
    const client = new SandboxdClient({ baseUrl: sim.url, token: ROOT });
    const a = await client.claim({ template: "img", claim_ref: "team-a/x" });
    const b = await client.claim({ template: "img", claim_ref: "team-b/y" });
    await publish("node-fresh", [{ id: a.id, name: "team-a/x" }], new Date());
    await publish("node-old", [{ id: b.id, name: "team-b/y" }], new Date(Date.now() - 600_000));
    const p = spawnProxy(["--namespace=team-a", "--inventory-stale-after=90s", "--metrics-bind-address=127.0.0.1:0"]);
    try {
      const port = Number((await p.waitFor("envd proxy listening")).port);
      const ask = (id: string, token: string) =>
        fetch(`http://127.0.0.1:${port}/echo`, { headers: { host: `49983-${id.replace("sb_", "sb-")}.${DOMAIN}`, "x-access-token": token } });
      const ra = await ask(a.id, deriveAccessToken(SECRET, a.token));
      expect(ra.status).toBe(200);
      expect((await ra.json()).headers.host).toBe(`49983-${a.id.replace("sb_", "sb-")}.${DOMAIN}`);
      const gets = () => sim.requests.filter((e) => e.route === "get").length;
      // b's node is stale: not in inventory, and probes only ask fresh nodes — b lives on the same sandboxd as
      // the fresh node, so the probe reaches it: the token decides (a wrong one reads as unknown).
      const wrong = await ask(b.id, "0".repeat(64));
      expect(await wrong.json()).toEqual({ code: 502, message: "sandbox was not found" });
      const g = gets();
      const rb = await ask(b.id, envdAccessToken(SECRET, b.id, b.token));
      expect(rb.status).toBe(200);
      expect(gets()).toBeGreaterThan(g);
      const health = await fetch(`http://127.0.0.1:${port}/healthz`);
      expect(health.status).toBe(204);
      // The series are on the metrics listener only; the public listener answers /metrics as a path naming no sandbox.
      const metricsPort = Number((await p.waitFor("metrics listening")).port);
      const metrics = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
      expect(metrics).toContain('sandbox_envd_proxy_owner_lookups_total{result="inventory"} 1');
      const onPublic = await fetch(`http://127.0.0.1:${port}/metrics`);
      expect([onPublic.status, await onPublic.text()]).toEqual([400, `${JSON.stringify({ code: 400, message: "no sandbox in the request host or headers" })}\n`]);
    } finally {
      await p.stop();
    }
  }, 60_000);

  test("27: every node stale (only an old publishedAt beside a fresh one) => uncached sandboxes on it answer 502", async () => {
    const other = await startSandboxdSim({ rootToken: ROOT, pools: ["img/none/small=1"] });
    try {
      const client = new SandboxdClient({ baseUrl: other.url, token: ROOT });
      const c = await client.claim({ template: "img", claim_ref: "team-a/z" });
      await applyInventory(kube.cluster, { node: "node-other", address: other.addr, publishedAt: new Date(Date.now() - 600_000), entries: [{ id: c.id, name: "team-a/z", phase: "Running" }] });
      await publish("node-fresh", [], new Date());
      const p = spawnProxy();
      try {
        const port = Number((await p.waitFor("envd proxy listening")).port);
        const r = await fetch(`http://127.0.0.1:${port}/health`, { headers: { host: `49983-${c.id.replace("sb_", "sb-")}.${DOMAIN}`, "x-access-token": deriveAccessToken(SECRET, c.token) } });
        expect(await r.json()).toEqual({ code: 502, message: "sandbox was not found" });
        expect(other.requests.filter((e) => e.route === "ports")).toHaveLength(0);
      } finally {
        await p.stop();
      }
    } finally {
      await other.stop();
    }
  }, 60_000);

  test("2: no root token (empty token file) exits 1 before listening", async () => {
    writeFileSync(join(dir, "empty-token"), "\n");
    const proc = Bun.spawnSync(["bun", MAIN, `--domain=${DOMAIN}`, `--e2b-envd-secret-file=${join(dir, "secret")}`, `--sandboxd-token-file=${join(dir, "empty-token")}`], {
      env: { ...process.env, KUBECONFIG: kubeconfig },
    });
    expect(proc.exitCode).toBe(1);
    expect(proc.stderr.toString()).toContain("the node token is required");
  });
});

describe("missing CRD", () => {
  test("the inventory source does not sync: startup fails naming the CRD (wait shortened through startEnvdProxy)", async () => {
    // In-process: the 2 min wait is shortened through the programmatic entry, not a flag or an environment variable
    // (the seed's flag table is the binary's whole --help). runMain turns the StartupError into exit 1.
    const bare = await startKubeFixture({ crd: false });
    try {
      const env = { KUBECONFIG: bare.cluster.kubeconfig() };
      const outcome = parseEnvdProxyFlags(["--bind-address=127.0.0.1:0", `--domain=${DOMAIN}`, `--e2b-envd-secret-file=${join(dir, "secret")}`, `--sandboxd-token-file=${join(dir, "token")}`], env);
      if (outcome.kind !== "run") throw new Error("flags did not parse to a run");
      const log = createLogger({ level: "error", name: "sandbox-envd-proxy", destination: { write: () => undefined } });
      const err = await startEnvdProxy(outcome.config, log, env, undefined, { inventorySyncTimeoutMs: 1500 }).then(
        async (p) => {
          await p.stop();
          return new Error("startEnvdProxy resolved without the NodeInventory CRD");
        },
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(StartupError);
      expect((err as StartupError).message).toBe("kubeinventory: node inventory cache did not sync within 1.5s (is the NodeInventory.sandbox.cocoonstack.io CRD installed?)");
    } finally {
      await bare.stop();
    }
  }, 180_000);
});
