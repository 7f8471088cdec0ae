// Issue 7, the claim-path leaks, with the daemon as its own process on a real kube-apiserver (as the
// manifests/rbac.yaml ServiceAccount) and the sandboxd simulator in this process:
//   case 1  a two-node simulator mesh with a local warm miss: the redirect is no capacity, never followed
//   case 2  a lost reply while another root claim holds the same claim_ref: only our own VM is recovered
//   case 3  a tenant claim with forged vk-sandbox metadata, then a (re)start: never recorded under the victim
// Provider-level twins: tests/unit/services/vk-sandbox/provider/claim-path.test.ts.
import { afterAll, afterEach, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { SandboxdClient } from "#shared/sandboxd/client.ts";
import { startSimCluster, type SandboxdSim, type SimCluster } from "#services/sandboxd-sim/sim.ts";
import { freePorts } from "../../kube/ports.ts";
import { CLAIM_ID, runningWithClaim, sandboxPod } from "./cluster.ts";
import { waitFor } from "../../support/wait.ts";
import { Daemon } from "./daemon.ts";
import { SANDBOXD_TOKEN, simClaimsFor, useE2eStack } from "./stack.ts";

const env = useE2eStack({ sim: { pools: ["base=20"] } });
let mesh: SimCluster | undefined;
afterAll(async () => {
  await mesh?.stop();
});
// A failed test must not leave its faults to the next one on the shared simulator.
afterEach(() => env.stack.sim.clearFaults());

const pod = (name: string) => env.e2e.kube.pod("ns", name);
const rootClient = (url: string) => new SandboxdClient({ baseUrl: url, token: SANDBOXD_TOKEN, retry: { attempts: 1 } });
/** Claims the daemon on `node` made (its stamp is in the body). */
const daemonClaims = (sim: SandboxdSim, node: string) =>
  sim.requests.filter((r) => r.route === "claim" && (r.body as { metadata?: Record<string, string> })?.metadata?.["vk-sandbox.node"] === node);

describe("issue 7 claim path (process)", () => {
  test("case 1: two-node mesh, local warm miss: the Pod waits for local capacity, nothing is claimed on the peer", async () => {
    mesh = await startSimCluster(2, { rootToken: SANDBOXD_TOKEN, pools: ["base=0"], seed: 7 });
    const [local, peer] = mesh.nodes as [SandboxdSim, SandboxdSim];
    peer.setWarm("base", 3);
    const port = freePorts(1)[0]!;
    const d = Daemon.start({
      args: [
        "--node-name=vk-mesh",
        `--listen-addr=127.0.0.1:${port}`,
        `--sandboxd-url=${local.url}`,
        `--sandboxd-token-file=${env.stack.tokenFile}`,
        `--state-path=${join(env.stack.dir, "mesh", "claims.json")}`,
      ],
      env: { KUBECONFIG: env.e2e.nodeKubeconfig("vk-mesh"), VK_LOG_LEVEL: "debug" },
    });
    await d.waitForLog(/vk-sandbox ready/);
    await env.e2e.kube.createPod(sandboxPod("meshed", "vk-mesh"));
    const failed = await waitFor("meshed ProviderFailed", async () => {
      const p = await pod("meshed");
      return p?.status?.reason === "ProviderFailed" && p;
    });
    expect(failed.status?.phase).toBe("Pending");
    expect(failed.status?.message).toMatch(/no warm capacity/);
    expect(local.requests.filter((r) => r.route === "claim").length).toBeGreaterThanOrEqual(1);
    expect(peer.requests.filter((r) => r.route === "claim")).toHaveLength(0);
    expect(peer.claims()).toHaveLength(0);

    // Local capacity returns: the retry claims here, on the node whose sandboxd this daemon can release on.
    local.setWarm("base", 1);
    const running = await runningWithClaim(env.e2e.kube, "ns", "meshed", 60_000);
    expect(local.claims().map((c) => c.id)).toEqual([running.metadata!.annotations![CLAIM_ID]!]);
    expect(peer.claims()).toHaveLength(0);
    await d.kill("SIGKILL");
  }, 120_000);

  test("case 2: a 500 on the claim while another root claim holds the same claim_ref: the other party's VM is never adopted", async () => {
    const { sim } = env.stack;
    const d = env.stack.daemon({ node: "vk-lost500", statePath: join(env.stack.dir, "lost500", "claims.json") });
    await d.waitForLog(/vk-sandbox ready/);
    const other = await rootClient(sim.url).claim({ template: "base", claim_ref: "ns/lost500" }, { reconcile: false });
    sim.fail("claim", 500, { error: "internal error" });
    await env.e2e.kube.createPod(sandboxPod("lost500", "vk-lost500"));
    const id = (await runningWithClaim(env.e2e.kube, "ns", "lost500")).metadata!.annotations![CLAIM_ID]!;
    expect(id).not.toBe(other.id);
    expect(simClaimsFor(sim, "ns/lost500").map((c) => c.id).sort()).toEqual([id, other.id].sort());
    await d.kill("SIGKILL");
  }, 60_000);

  test("case 2: a reply lost after commit while another root claim holds the same claim_ref: the daemon's own VM is used, none leaks", async () => {
    const { sim } = env.stack;
    const d = env.stack.daemon({ node: "vk-lostreset", statePath: join(env.stack.dir, "lostreset", "claims.json"), direct: true });
    await d.waitForLog(/vk-sandbox ready/);
    const other = await rootClient(sim.url).claim({ template: "base", claim_ref: "ns/lostreset" }, { reconcile: false });
    sim.reset("claim", "after");
    await env.e2e.kube.createPod(sandboxPod("lostreset", "vk-lostreset"));
    const id = (await runningWithClaim(env.e2e.kube, "ns", "lostreset")).metadata!.annotations![CLAIM_ID]!;
    const ours = simClaimsFor(sim, "ns/lostreset").filter((c) => c.id !== other.id);
    expect(ours.map((c) => c.id)).toEqual([id]);
    expect(daemonClaims(sim, "vk-lostreset")).toHaveLength(1);
    await d.kill("SIGKILL");
  }, 60_000);

  test("case 3: a tenant claim with forged vk-sandbox metadata, then a start: the victim Pod never gets the tenant's VM", async () => {
    const { sim } = env.stack;
    sim.setTenant("mallory", "mallory-token", 10);
    // The victim Pod exists while its node's daemon is down; the tenant reads its UID and claims in its name.
    const victim = await env.e2e.kube.createPod(sandboxPod("victim", "vk-forged"));
    const uid = victim.metadata!.uid!;
    const tenant = new SandboxdClient({ baseUrl: sim.url, token: "mallory-token", retry: { attempts: 1 } });
    const forged = await tenant.claim(
      {
        template: "base",
        ttl_seconds: 86_400,
        claim_ref: "ns/victim",
        metadata: { "vk-sandbox.node": "vk-forged", "vk-sandbox.pod-uid": uid, "vk-sandbox.authority": uid },
      },
      { reconcile: false },
    );
    const d = env.stack.daemon({ node: "vk-forged", statePath: join(env.stack.dir, "forged", "claims.json") });
    await d.waitForLog(/vk-sandbox ready/);
    const id = (await runningWithClaim(env.e2e.kube, "ns", "victim")).metadata!.annotations![CLAIM_ID]!;
    expect(id).not.toBe(forged.id);
    // The tenant's VM is the tenant's business: neither adopted nor released by this daemon.
    expect(sim.claims().some((c) => c.id === forged.id)).toBe(true);
    await d.kill("SIGKILL");
  }, 60_000);
});

describe("issue 7 same name, new UID (process)", () => {
  test("case 5: a Pod deleted and recreated under the same name before its sync runs: the old VM is released, the new Pod claims", async () => {
    const { sim } = env.stack;
    // qps 1 / burst 1: the sync queue waits for bucket tokens, so a burst of events queued just before the
    // delete holds the key's sync back while both the deletion and the recreation reach the informer.
    const d = env.stack.daemon({ node: "vk-race", statePath: join(env.stack.dir, "race", "claims.json"), extra: ["--kube-api-qps=1", "--kube-api-burst=1"] });
    await d.waitForLog(/vk-sandbox ready/);
    const first = await env.e2e.kube.createPod(sandboxPod("race", "vk-race"));
    const oldId = (await runningWithClaim(env.e2e.kube, "ns", "race", 60_000)).metadata!.annotations![CLAIM_ID]!;
    await Promise.all([1, 2, 3, 4].map((i) => env.e2e.kube.createPod(sandboxPod(`filler-${i}`, "vk-race"))));
    await env.e2e.kube.deletePod("ns", "race", 0);
    const second = await env.e2e.kube.createPod(sandboxPod("race", "vk-race"));
    expect(second.metadata!.uid).not.toBe(first.metadata!.uid);

    const running = await waitFor(
      "the new race Pod Running on a new claim",
      async () => {
        const p = await pod("race");
        return p && p.metadata?.uid === second.metadata!.uid && p.status?.phase === "Running" && !!p.metadata?.annotations?.[CLAIM_ID] && p;
      },
      60_000,
    );
    const newId = running.metadata!.annotations![CLAIM_ID]!;
    expect(newId).not.toBe(oldId);
    // The stored (old) Pod's deletion ran with the delete authorization: a bare Pod, so its VM is released.
    await waitFor("old VM released", async () => !sim.claims().some((c) => c.id === oldId), 30_000);
    expect(simClaimsFor(sim, "ns/race").map((c) => c.id)).toEqual([newId]);
    expect(d.log()).toMatch(/replaced under the same name/);
    await d.kill("SIGKILL");
  }, 120_000);
});

describe("issue 7 claims that land after their request gave up (process)", () => {
  // A cold boot may take 90 s against the claim's 10 s budget: the simulator holds the claim 12 s, then commits
  // it. The daemon's request times out at 10 s, its lost-reply check finds nothing listed yet, and the create fails.
  const HOLD_MS = 12_000;
  const claimRequestsFor = (node: string) => daemonClaims(env.stack.sim, node).length;

  test("case 6: the Pod still waits: the late sandbox is adopted by it", async () => {
    const { sim } = env.stack;
    const node = "vk-late-adopt";
    const d = env.stack.daemon({ node, statePath: join(env.stack.dir, "late-adopt", "claims.json"), direct: true, extra: ["--orphan-scan-interval=1s"] });
    await d.waitForLog(/vk-sandbox ready/);
    sim.latency("claim", HOLD_MS);
    await env.e2e.kube.createPod(sandboxPod("late-adopt", node));
    await waitFor("first claim sent", async () => claimRequestsFor(node) >= 1, 10_000, 25);
    // Every later claim is refused, so only the late one can ever serve the Pod.
    sim.latency("claim", null);
    sim.fail("claim", 429, { error: "node claim quota reached: 1 live claims, cap 1" }, Number.POSITIVE_INFINITY);
    const late = await waitFor("late claim committed", async () => simClaimsFor(sim, "ns/late-adopt")[0], 20_000, 100);
    const running = await runningWithClaim(env.e2e.kube, "ns", "late-adopt", 30_000);
    expect(running.metadata!.annotations![CLAIM_ID]).toBe(late.id);
    expect(simClaimsFor(sim, "ns/late-adopt").map((c) => c.id)).toEqual([late.id]);
    sim.clearFaults();
    await d.kill("SIGKILL");
  }, 90_000);

  test("case 6: the Pod got another sandbox meanwhile: the late one is released with the node token", async () => {
    const { sim } = env.stack;
    const node = "vk-late-release";
    const d = env.stack.daemon({ node, statePath: join(env.stack.dir, "late-release", "claims.json"), direct: true, extra: ["--orphan-scan-interval=1s"] });
    await d.waitForLog(/vk-sandbox ready/);
    sim.latency("claim", HOLD_MS);
    await env.e2e.kube.createPod(sandboxPod("late-release", node));
    await waitFor("first claim sent", async () => claimRequestsFor(node) >= 1, 10_000, 25);
    sim.latency("claim", null);
    const id = (await runningWithClaim(env.e2e.kube, "ns", "late-release", 30_000)).metadata!.annotations![CLAIM_ID]!;
    // The late sandbox lands about 2 s after the retry's claim and is released within a scan (1 s): watch the
    // release log rather than race to see it live.
    const releasedBefore = new Set(sim.requests.filter((r) => r.route === "release").map((r) => r.path));
    const release = await waitFor(
      "late claim released",
      async () => sim.requests.find((r) => r.route === "release" && r.outcome === 204 && !releasedBefore.has(r.path) && d.log().includes(r.path.split("/")[3]!)),
      20_000,
      100,
    );
    const lateId = release.path.split("/")[3]!;
    expect(lateId).not.toBe(id);
    expect(d.log()).toMatch(new RegExp(`"sandboxId":"${lateId}".*released with the node token`));
    expect(sim.claims().some((c) => c.id === lateId)).toBe(false);
    expect(simClaimsFor(sim, "ns/late-release").map((c) => c.id)).toEqual([id]);
    await d.kill("SIGKILL");
  }, 90_000);
});
