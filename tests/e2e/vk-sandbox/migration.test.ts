// Issue 7 case 10: node-by-node migration from the upstream Go daemon. Operators stop the Go daemon on one node
// and start this one with the same node name and the same state file. The Node then carries virtual-kubelet's
// own last-applied annotations (meta as {"name","uid","labels"}), and claims.json is in the upstream format (no
// `authority`, no `releasing`). The daemon must adopt every claim with no claim and no release and keep running.
import { describe, expect, test } from "bun:test";
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { SandboxdClient } from "#shared/sandboxd/client.ts";
import { waitFor } from "../../support/wait.ts";
import { CLAIM_ID, sandboxPod } from "./cluster.ts";
import { providerPods, SANDBOXD_TOKEN, useE2eStack } from "./stack.ts";

const env = useE2eStack({ sim: { pools: ["base=10"] } });
const NODE = "vk-upstream";

/** The Node as virtual-kubelet v1.13 left it: its own annotations and a status it wrote. */
async function upstreamNode(): Promise<void> {
  const labels = { type: "virtual-kubelet", "kubernetes.io/role": "agent", "kubernetes.io/hostname": NODE, "sandbox.cocoonstack.io/runtime": "sandboxd" };
  const created = await env.e2e.kube.ok<{ metadata: { uid: string } }>("POST", "/api/v1/nodes", {
    apiVersion: "v1",
    kind: "Node",
    metadata: { name: NODE, labels },
    spec: { taints: [{ key: "virtual-kubelet.io/provider", value: "sandboxd", effect: "NoSchedule" }] },
  });
  const status = {
    capacity: { cpu: "4k", memory: "8Ti", pods: "2k" },
    allocatable: { cpu: "4k", memory: "8Ti", pods: "2k" },
    conditions: [{ type: "Ready", status: "True", reason: "KubeletReady", message: "Kubelet is ready", lastHeartbeatTime: "2026-07-27T02:00:00Z", lastTransitionTime: "2026-07-27T01:00:00Z" }],
    addresses: [{ type: "Hostname", address: NODE }],
    daemonEndpoints: { kubeletEndpoint: { Port: 10260 } },
    nodeInfo: { kubeletVersion: "v1.13.0-vk-sandbox", operatingSystem: "linux", architecture: "amd64", machineID: "", systemUUID: "", bootID: "", kernelVersion: "", osImage: "", containerRuntimeVersion: "", kubeProxyVersion: "" },
  };
  const annotations = {
    "virtual-kubelet.io/last-applied-object-meta": JSON.stringify({ name: NODE, uid: created.metadata.uid, labels }),
    "virtual-kubelet.io/last-applied-node-status": JSON.stringify(status),
  };
  const r = await env.e2e.cluster.adminFetch(`/api/v1/nodes/${NODE}/status`, {
    method: "PATCH",
    headers: { "content-type": "application/merge-patch+json" },
    body: JSON.stringify({ metadata: { annotations }, status }),
  });
  if (r.status !== 200) throw new Error(`node status patch: ${r.status} ${await r.text()}`);
}

describe("issue 7 case 10: migration from the upstream Go daemon (process)", () => {
  test("from an upstream Node and claims.json, the daemon adopts every claim with no claim and no release and keeps running", async () => {
    const { sim } = env.stack;
    await upstreamNode();
    // Pods the Go daemon served, and the claims it made (root token, no vk-sandbox stamp).
    const root = new SandboxdClient({ baseUrl: sim.url, token: SANDBOXD_TOKEN, retry: { attempts: 1 } });
    const rows: Record<string, object> = {};
    const ids = new Map<string, string>();
    for (const name of ["u1", "u2"]) {
      const p = await env.e2e.kube.createPod(sandboxPod(name, NODE));
      const c = await root.claim({ template: "base", ttl_seconds: 86_400, claim_ref: `ns/${name}` }, { reconcile: false });
      ids.set(name, c.id);
      // The upstream row: no authority, no releasing list.
      rows[`ns/${name}`] = { id: c.id, token: c.token, address: c.owner_addr, podUID: p.metadata!.uid, claimedAt: "2026-07-27T02:00:00Z", deadline: c.deadline };
    }
    const statePath = join(env.stack.dir, "upstream", "claims.json");
    mkdirSync(dirname(statePath), { recursive: true, mode: 0o700 });
    writeFileSync(statePath, JSON.stringify({ claims: rows }), { mode: 0o600 });
    const claims0 = sim.requests.filter((r) => r.route === "claim").length;
    const releases0 = sim.requests.filter((r) => r.route === "release").length;

    const d = env.stack.daemon({ node: NODE, statePath });
    await d.waitForLog(/vk-sandbox ready/, 60_000);
    await waitFor("both pods adopted", async () => {
      const held = await providerPods(d.port, env.e2e.cluster.kubeletClient);
      return held.includes("u1") && held.includes("u2");
    });
    for (const name of ["u1", "u2"]) {
      const p = await waitFor(`${name} Running`, async () => {
        const pod = await env.e2e.kube.pod("ns", name);
        return pod?.status?.phase === "Running" && !!pod.metadata?.annotations?.[CLAIM_ID] && pod;
      });
      expect(p.metadata!.annotations![CLAIM_ID]).toBe(ids.get(name)!);
    }
    // Still running after a few status patches, with the Node Ready and its labels patched.
    await Bun.sleep(1500);
    expect(d.proc.exitCode).toBeNull();
    const node = await env.e2e.kube.node(NODE);
    expect(node.body.metadata.labels["kubernetes.io/hostname"]).toBe(NODE);
    expect(node.body.status.conditions.find((c: { type: string }) => c.type === "Ready")?.status).toBe("True");
    expect(sim.requests.filter((r) => r.route === "claim").length).toBe(claims0);
    expect(sim.requests.filter((r) => r.route === "release").length).toBe(releases0);
    await d.kill("SIGKILL");
  }, 120_000);
});
