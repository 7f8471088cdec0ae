// The virtual Node against a real kube-apiserver (scenarios 1, 3, 44, 49), acting with the vk-sandbox
// ServiceAccount token that manifests/rbac.yaml binds.
import { describe, expect, test } from "bun:test";
import type { V1Node } from "@kubernetes/client-node";
import { Nodes } from "#shared/kube/resources.ts";
import { isNotFound } from "#shared/kube/errors.ts";
import { LAST_APPLIED_STATUS, LeaseController, NodeController, type NodeSpecInput } from "#services/vk-sandbox/node/index.ts";
import { nodeSpecFromFlags, quietLog, useKubeFixture } from "./kube-fixture.ts";
import { waitFor } from "../../support/wait.ts";

const k = useKubeFixture();
const running = k.running;

/** Starts the node the way wire.ts does: ensure → status loop → Lease → Ready. */
async function startNode(spec: NodeSpecInput, statusIntervalMs = 60_000) {
  const node = new NodeController({ client: k.daemon, spec, log: quietLog, statusIntervalMs });
  running.push(node);
  await node.ensure();
  node.start();
  const lease = new LeaseController({ client: k.daemon, nodeName: spec.nodeName, nodeRef: () => node.nodeRef(), nodeGone: () => node.gone, log: quietLog });
  running.push(lease);
  lease.start();
  await node.markReady();
  return { node, lease };
}

const getNode = (name: string) => k.admin.get<V1Node>(Nodes, name);
const readyOf = (n: V1Node) => n.status?.conditions?.find((c) => c.type === "Ready");

describe("virtual Node on a real apiserver", () => {
  test("scenario 1: with defaults, Node vk-sandboxd has the labels, taint, port, budget and is Ready within 30 s", async () => {
    const started = Date.now();
    const { node, lease } = await startNode(nodeSpecFromFlags());
    const n = await waitFor("a condition", async () => {
      const got = await getNode("vk-sandboxd");
      return readyOf(got)?.status === "True" ? got : undefined;
    });
    expect(Date.now() - started).toBeLessThan(30_000);
    expect(n.metadata?.labels).toMatchObject({
      type: "virtual-kubelet",
      "kubernetes.io/role": "agent",
      "kubernetes.io/hostname": "vk-sandboxd",
      "sandbox.cocoonstack.io/runtime": "sandboxd",
    });
    // The TaintNodesByCondition admission plugin adds node.kubernetes.io/not-ready to every new Node; in a real
    // cluster the node lifecycle controller lifts it once Ready. This test cluster runs no controller-manager.
    const taints = (n.spec?.taints ?? []).filter((t) => t.key !== "node.kubernetes.io/not-ready");
    expect(taints).toEqual([{ key: "virtual-kubelet.io/provider", value: "sandboxd", effect: "NoSchedule" }]);
    expect(n.status?.daemonEndpoints?.kubeletEndpoint?.Port).toBe(10260);
    expect(n.status?.capacity).toEqual({ cpu: "4k", memory: "8Ti", pods: "2k" });
    expect(n.status?.allocatable).toEqual(n.status?.capacity);
    expect(n.status?.phase).toBe("Running");
    expect(readyOf(n)).toMatchObject({ reason: "KubeletReady", message: "Kubelet is ready" });
    expect(n.status?.conditions?.map((c) => c.type).sort()).toEqual(
      ["DiskPressure", "MemoryPressure", "NetworkUnavailable", "PIDPressure", "Ready"].sort(),
    );
    expect(n.metadata?.annotations?.[LAST_APPLIED_STATUS]).toBeTruthy();
    await waitFor("a condition", async () => lease.renewCount >= 1);
    await lease.stop();
    await node.stop();
  }, 60_000);

  test("scenario 3: --node-ip gives addresses [InternalIP, Hostname] in that order; without it only Hostname", async () => {
    await startNode(nodeSpecFromFlags(["--node-name=with-ip", "--node-ip=10.1.2.3"]));
    await startNode(nodeSpecFromFlags(["--node-name=without-ip"]));
    const withIp = await waitFor("a condition", async () => {
      const n = await getNode("with-ip");
      return readyOf(n)?.status === "True" ? n : undefined;
    });
    expect(withIp.status?.addresses).toEqual([
      { type: "InternalIP", address: "10.1.2.3" },
      { type: "Hostname", address: "with-ip" },
    ]);
    const without = await getNode("without-ip");
    expect(without.status?.addresses).toEqual([{ type: "Hostname", address: "without-ip" }]);
    // Restarted without --node-ip: the three-way patch removes the InternalIP it had applied.
    await startNode(nodeSpecFromFlags(["--node-name=with-ip"]));
    const dropped = await getNode("with-ip");
    expect(dropped.status?.addresses).toEqual([{ type: "Hostname", address: "with-ip" }]);
  }, 60_000);

  test("the status loop refreshes every condition's heartbeat and keeps Ready's transition time", async () => {
    await startNode(nodeSpecFromFlags(["--node-name=heartbeat"]), 300);
    const first = await getNode("heartbeat");
    const t0 = Date.parse(String(readyOf(first)?.lastHeartbeatTime));
    // metav1.Time has one-second resolution: wait for a later second.
    const later = await waitFor("a condition", async () => {
      const n = await getNode("heartbeat");
      return Date.parse(String(readyOf(n)?.lastHeartbeatTime)) > t0 ? n : undefined;
    }, 10_000);
    const beats = new Set(later.status?.conditions?.map((c) => String(c.lastHeartbeatTime)));
    expect(beats.size).toBe(1);
    // The heartbeat moves; the transition into Ready does not.
    expect(String(readyOf(later)?.lastTransitionTime)).toBe(String(readyOf(first)?.lastTransitionTime));
  }, 30_000);

  test("scenario 49: a restart leaves an operator's taint edits alone but patches labels and status", async () => {
    const spec = nodeSpecFromFlags(["--node-name=edited"]);
    const first = await startNode(spec);
    await first.lease.stop();
    await first.node.stop();
    // An operator edits the taints and adds a label and a condition of their own.
    await k.admin.patch(Nodes, "edited", { spec: { taints: [{ key: "operator/hold", value: "yes", effect: "NoExecute" }] }, metadata: { labels: { theirs: "1" } } }, { type: "merge" });
    await k.admin.patch(
      Nodes,
      "edited",
      { status: { conditions: [{ type: "TheirCheck", status: "False", reason: "Fine", message: "set by an operator" }] } },
      { type: "strategic", subresource: "status" },
    );
    const before = await getNode("edited");
    // Restart with different --node-labels: the old runtime label goes, a new one comes.
    const spec2 = nodeSpecFromFlags(["--node-name=edited", "--node-labels=pool=blue"]);
    await startNode(spec2);
    const after = await waitFor("a condition", async () => {
      const n = await getNode("edited");
      return n.metadata?.labels?.pool === "blue" ? n : undefined;
    });
    expect(after.spec?.taints).toEqual([{ key: "operator/hold", value: "yes", effect: "NoExecute" }]);
    expect(after.metadata?.uid).toBe(before.metadata?.uid);
    expect(after.metadata?.labels?.theirs).toBe("1");
    expect(after.metadata?.labels?.["sandbox.cocoonstack.io/runtime"]).toBeUndefined();
    expect(after.status?.conditions?.find((c) => c.type === "TheirCheck")?.message).toBe("set by an operator");
    expect(readyOf(after)?.status).toBe("True");
  }, 60_000);

  test("scenario 44 (node part): a Node deleted while running is not recreated and the gone signal fires", async () => {
    const { node, lease } = await startNode(nodeSpecFromFlags(["--node-name=doomed"]), 200);
    await waitFor("a condition", async () => lease.renewCount >= 1);
    await k.admin.delete(Nodes, "doomed");
    await Promise.race([node.whenGone, Bun.sleep(10_000).then(() => Promise.reject(new Error("gone signal not fired")))]);
    expect(node.gone).toBe(true);
    await Bun.sleep(800);
    let err: unknown;
    try {
      await getNode("doomed");
    } catch (e) {
      err = e;
    }
    expect(isNotFound(err)).toBe(true);
  }, 30_000);
});
