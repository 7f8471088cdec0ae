import { describe, expect, test } from "bun:test";
import { buildNode, nodeStatus } from "#services/vk-sandbox/node/node-object.ts";

const spec = {
  nodeName: "vk-sandboxd",
  kubeletPort: 10260,
  cpu: "4000",
  memory: "8Ti",
  pods: "2000",
  extraLabels: { "sandbox.cocoonstack.io/runtime": "sandboxd" },
};

describe("node object", () => {
  test("a new node carries the fixed labels, the --node-labels pairs, the taint and the budget", () => {
    const n = buildNode(spec, new Date(0));
    expect(n.metadata?.labels).toEqual({
      type: "virtual-kubelet",
      "kubernetes.io/role": "agent",
      "kubernetes.io/hostname": "vk-sandboxd",
      "sandbox.cocoonstack.io/runtime": "sandboxd",
    });
    expect(n.spec?.taints).toEqual([{ key: "virtual-kubelet.io/provider", value: "sandboxd", effect: "NoSchedule" }]);
    expect(n.status?.capacity).toEqual({ cpu: "4000", memory: "8Ti", pods: "2000" });
    expect(n.status?.allocatable).toEqual(n.status?.capacity);
    expect(n.status?.daemonEndpoints?.kubeletEndpoint?.Port).toBe(10260);
    expect(n.status?.phase).toBe("Pending");
    expect(n.status?.conditions?.map((c) => [c.type, c.status])).toEqual([
      ["Ready", ""],
      ["DiskPressure", ""],
      ["MemoryPressure", ""],
      ["PIDPressure", ""],
      ["NetworkUnavailable", ""],
    ]);
  });

  test("--node-labels may override the fixed labels", () => {
    const n = buildNode({ ...spec, extraLabels: { type: "mine" } }, new Date(0));
    expect(n.metadata?.labels?.type).toBe("mine");
  });

  test("addresses are InternalIP then Hostname, and only Hostname without a node IP", () => {
    expect(nodeStatus({ ...spec, nodeIp: "10.1.2.3" }, undefined, new Date(0)).addresses).toEqual([
      { type: "InternalIP", address: "10.1.2.3" },
      { type: "Hostname", address: "vk-sandboxd" },
    ]);
    expect(nodeStatus(spec, undefined, new Date(0)).addresses).toEqual([{ type: "Hostname", address: "vk-sandboxd" }]);
  });

  test("readiness sets Ready True with KubeletReady, keeps the transition time fixed and leaves the other four empty", () => {
    const since = new Date(1_000_000);
    const now = new Date(2_000_000);
    const s = nodeStatus(spec, since, now);
    expect(s.phase).toBe("Running");
    expect(s.conditions?.[0]).toEqual({
      type: "Ready",
      status: "True",
      reason: "KubeletReady",
      message: "Kubelet is ready",
      lastTransitionTime: since,
      lastHeartbeatTime: now,
    });
    expect(s.conditions?.slice(1).every((c) => c.status === "")).toBe(true);
  });
});
