// sandbox-envd-proxy's --namespace on a real kube-apiserver: inventory lookups see only that namespace's entries.
// A sandbox of another namespace listed on a fresh node is therefore not resolved from the inventory: with a
// valid token the probe finds it (--namespace is not an access boundary), but a signed file URL (no token, never
// probed) answers 502 and reaches no node. In-process through startEnvdProxy, with the real flags.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startKubeFixture, type KubeFixture } from "../vk-sandbox/kube-fixture.ts";
import { startSandboxdSim, type SandboxdSim } from "#services/sandboxd-sim/sim.ts";
import { SandboxdClient } from "#shared/sandboxd/client.ts";
import { deriveAccessToken, envdAccessToken } from "#shared/e2b/tokens.ts";
import { applyInventory, vouchingNode } from "#tests/kube/nodes.ts";
import { fileSignature } from "#shared/sandboxd/urls.ts";
import { startTestGuest, type TestGuest } from "../e2b/guest.ts";
import { createLogger } from "#shared/log/index.ts";
import { parseEnvdProxyFlags } from "#services/sandbox-envd-proxy/flags.ts";
import { startEnvdProxy, type RunningProxy } from "#services/sandbox-envd-proxy/wire.ts";

const ROOT = "root-proxy-namespace";
const SECRET = "proxy-namespace-secret";
const DOMAIN = "px.test";

let kube: KubeFixture;
let sim: SandboxdSim;
let guest: TestGuest;
let dir: string;
let proxy: RunningProxy;
let a: { id: string; token: string };
let b: { id: string; token: string };

beforeAll(async () => {
  kube = await startKubeFixture({ crd: true });
  sim = await startSandboxdSim({ rootToken: ROOT, pools: ["img/none/small=4"] });
  guest = await startTestGuest();
  sim.attachGuest("*", 49983, guest.port);
  dir = mkdtempSync(join(tmpdir(), "envd-proxy-ns-"));
  writeFileSync(join(dir, "secret"), SECRET);
  writeFileSync(join(dir, "token"), `${ROOT}\n`);
  const client = new SandboxdClient({ baseUrl: sim.url, token: ROOT });
  a = await client.claim({ template: "img", claim_ref: "team-a/x" });
  b = await client.claim({ template: "img", claim_ref: "team-b/y" });
  // Both on one fresh node: only the namespace decides what the inventory lookup may return. The Node vouches for
  // the inventory's address (shared/fleet/trust.ts), or no reader would call it.
  await vouchingNode(kube.cluster, "node-1", sim.addr);
  await applyInventory(kube.cluster, {
    node: "node-1",
    address: sim.addr,
    entries: [
      { id: a.id, name: "team-a/x", phase: "Running" },
      { id: b.id, name: "team-b/y", phase: "Running" },
    ],
  });
  const env = { KUBECONFIG: kube.cluster.kubeconfig() };
  const flags = parseEnvdProxyFlags(
    ["--bind-address=127.0.0.1:0", `--domain=${DOMAIN}`, `--e2b-envd-secret-file=${join(dir, "secret")}`, `--sandboxd-token-file=${join(dir, "token")}`, "--namespace=team-a"],
    env,
  );
  if (flags.kind !== "run") throw new Error("flags did not parse to a run");
  // Startup waits for the NodeInventory cache to sync, and the inventory was applied before: both entries are in.
  proxy = await startEnvdProxy(flags.config, createLogger({ level: "error", name: "sandbox-envd-proxy" }), env);
}, 180_000);
afterAll(async () => {
  await proxy?.stop();
  await guest?.stop();
  await sim?.stop();
  await kube?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const pub = (id: string) => id.replace(/^sb_/, "sb-");
const ask = (id: string, path: string, headers: Record<string, string> = {}) =>
  fetch(`http://127.0.0.1:${proxy.port}${path}`, { headers: { host: `49983-${pub(id)}.${DOMAIN}`, ...headers } });
const calls = (route: string) => sim.requests.filter((e) => e.route === route).length;
const signedPath = (token: string) =>
  `/files?path=/x&username=user&signature=${encodeURIComponent(fileSignature({ path: "/x", operation: "read", user: "user", accessToken: deriveAccessToken(SECRET, token) }))}`;

describe("--namespace=team-a", () => {
  test("a signed file URL of team-a's listed sandbox is relayed (passive, root token)", async () => {
    const p0 = calls("ports");
    const r = await ask(a.id, signedPath(a.token));
    expect(r.status).toBe(404); // the guest's own answer: no such file
    expect(calls("ports")).toBe(p0 + 1);
    expect(sim.requests.filter((e) => e.route === "ports").at(-1)!.auth).toBe("root");
  });

  test("a signed file URL of team-b's sandbox, listed on the same fresh node, is not resolved: 502 and no node call", async () => {
    const p0 = calls("ports");
    const g0 = calls("get");
    const r = await ask(b.id, signedPath(b.token));
    expect(await r.json()).toEqual({ code: 502, message: "sandbox was not found" });
    expect(calls("ports")).toBe(p0);
    expect(calls("get")).toBe(g0);
  });

  test("team-b's sandbox with its valid token is still relayed, found by the probe (--namespace is no access boundary)", async () => {
    // The probe lane takes only a token whose lane tag verifies for this id (docs/decisions.md "probe-lane-token").
    const r = await ask(b.id, "/echo", { "x-access-token": envdAccessToken(SECRET, b.id, b.token) });
    expect(r.status).toBe(200);
    expect((await r.json()).headers.host).toBe(`49983-${pub(b.id)}.${DOMAIN}`);
  });
});
