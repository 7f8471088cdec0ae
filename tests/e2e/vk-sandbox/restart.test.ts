// Process-level restarts of vk-sandbox on a real kube-apiserver with the sandboxd simulator: SIGKILL in the claim
// window, SIGKILL while pods run, and a restart while sandboxd is unreachable. The daemon runs as its own process
// (dist/vk-sandbox when built) and authenticates with the ServiceAccount token manifests/rbac.yaml binds.
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { sandboxPod } from "./cluster.ts";
import { waitFor } from "../../support/wait.ts";
import { providerPods, readClaimsTable, runningPod, simClaimsFor, simRequests, useE2eStack } from "./stack.ts";

const env = useE2eStack();

const table = readClaimsTable;

const running = (ns: string, name: string) => runningPod(env.e2e.kube, ns, name);

const requestsTo = (route: string) => simRequests(env.stack.sim, route);

describe("vk-sandbox restarts", () => {
  test("SIGKILL between sandboxd's claim reply and the state write leaks no VM and loses no token", async () => {
    // The simulator makes the window exact: it commits the claim and never answers, so sandboxd has delivered
    // the sandbox and the provider has not seen the reply when the process dies (well inside the 10 s timeout).
    const statePath = join(env.stack.dir, "crash", "claims.json");
    const first = env.stack.daemon({ node: "vk-crash", statePath });
    await first.waitForLog(/vk-sandbox ready/);
    env.stack.sim.hang("claim", 1, "after");
    await env.e2e.kube.createPod(sandboxPod("crash", "vk-crash"));
    const held = await waitFor("claim delivered", async () => simClaimsFor(env.stack.sim, "ns/crash")[0], 8_000, 25);
    await first.kill("SIGKILL");
    expect(table(statePath).claims["ns/crash"]).toBeUndefined();
    expect(simClaimsFor(env.stack.sim, "ns/crash").map((c) => c.id)).toEqual([held.id]);

    const second = env.stack.daemon({ node: "vk-crash", statePath });
    const pod = await running("ns", "crash");
    const live = simClaimsFor(env.stack.sim, "ns/crash");
    const row = table(statePath).claims["ns/crash"]!;
    // No leak: exactly one sandbox for the key. No lost token: the table holds that sandbox's own credential.
    expect(live.map((c) => c.id)).toEqual([row.id]);
    expect(row.token).toBe(live[0]!.token);
    expect(pod.metadata?.annotations?.["sandbox.cocoonstack.io/claim-id"]).toBe(row.id);
    await second.kill("SIGKILL");
  }, 90_000);

  test("SIGKILL while pods run, restart with sandboxd up: every pod keeps its claim id and start time, no claim call", async () => {
    const statePath = join(env.stack.dir, "kill9", "claims.json");
    const args = () => env.stack.daemon({ node: "vk-kill9", statePath });
    const first = args();
    await first.waitForLog(/vk-sandbox ready/);
    const names = ["k1", "k2", "k3"];
    await Promise.all(names.map((n) => env.e2e.kube.createPod(sandboxPod(n, "vk-kill9"))));
    const before = await Promise.all(names.map((n) => running("ns", n)));
    await first.kill("SIGKILL");

    const claimsBefore = requestsTo("claim");
    const second = args();
    await second.waitForLog(/vk-sandbox ready/);
    await waitFor("provider adopted every pod", async () => {
      const held = await providerPods(second.port, env.e2e.cluster.kubeletClient);
      return names.every((n) => held.includes(n));
    });
    const after = await Promise.all(names.map((n) => running("ns", n)));
    if (process.env.VK_E2E_DEBUG) console.log(first.log().slice(-6000), "\n=====SECOND=====\n", second.log());
    for (let i = 0; i < names.length; i++) {
      expect(after[i]!.metadata?.annotations?.["sandbox.cocoonstack.io/claim-id"]).toBe(
        before[i]!.metadata!.annotations!["sandbox.cocoonstack.io/claim-id"]!,
      );
      expect(String(after[i]!.status?.startTime)).toBe(String(before[i]!.status?.startTime));
    }
    expect(requestsTo("claim")).toBe(claimsBefore);
    await second.kill("SIGKILL");
  }, 90_000);

  test("restart while sandboxd is down: rows stay quarantined, nothing is released, pods recover on their claims", async () => {
    const statePath = join(env.stack.dir, "down", "claims.json");
    const first = env.stack.daemon({ node: "vk-down", statePath });
    await first.waitForLog(/vk-sandbox ready/);
    const names = ["d1", "d2"];
    // One at a time: this test is about the outage, not about concurrent commits (the test above covers those).
    const before = [];
    for (const n of names) {
      await env.e2e.kube.createPod(sandboxPod(n, "vk-down"));
      before.push(await running("ns", n));
    }
    await first.kill("SIGKILL");

    await env.stack.gate.down();
    const claims0 = requestsTo("claim");
    const releases0 = requestsTo("release");
    const second = env.stack.daemon({ node: "vk-down", statePath });
    // Startup tolerates the failed verification listing: the node comes up with every row quarantined.
    await second.waitForLog(/vk-sandbox ready/);
    await second.waitForLog(/sandboxd unavailable; pod status left unchanged/, 30_000);
    expect(await providerPods(second.port, env.e2e.cluster.kubeletClient)).toEqual([]);
    for (const [i, n] of names.entries()) {
      const p = await env.e2e.kube.pod("ns", n);
      // A transient outage is not evidence: the pods keep Running and their claim ids.
      expect(p?.status?.phase).toBe("Running");
      expect(p?.metadata?.annotations?.["sandbox.cocoonstack.io/claim-id"]).toBe(before[i]!.metadata!.annotations!["sandbox.cocoonstack.io/claim-id"]!);
    }
    expect(Object.keys(table(statePath).claims).sort()).toEqual(names.map((n) => `ns/${n}`));

    env.stack.gate.up();
    // Verification runs every 15 s; the sync retries with backoff. Adoption shows in the provider's pod table.
    await waitFor(
      "pods adopted on their original claims",
      async () => {
        const held = await providerPods(second.port, env.e2e.cluster.kubeletClient);
        return names.every((n) => held.includes(n));
      },
      60_000,
      250,
    );
    for (const [i, n] of names.entries()) {
      const p = await running("ns", n);
      expect(p.metadata?.annotations?.["sandbox.cocoonstack.io/claim-id"]).toBe(before[i]!.metadata!.annotations!["sandbox.cocoonstack.io/claim-id"]!);
      expect(String(p.status?.startTime)).toBe(String(before[i]!.status?.startTime));
    }
    expect(requestsTo("claim")).toBe(claims0);
    expect(requestsTo("release")).toBe(releases0);
    expect(simClaimsFor(env.stack.sim, "ns/d1")).toHaveLength(1);
    await second.kill("SIGKILL");
  }, 120_000);
});
