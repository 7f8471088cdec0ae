// The virtual Node as this daemon wants it to be (§2.1). Pure: no I/O, the clock is passed in.
import type { V1Node, V1NodeCondition, V1NodeStatus } from "@kubernetes/client-node";

/** Keeps ordinary workloads off the virtual node; the sandbox Pod template carries the matching toleration. */
export const PROVIDER_TAINT = { key: "virtual-kubelet.io/provider", value: "sandboxd", effect: "NoSchedule" } as const;

/** The five conditions a kubelet reports. Only Ready is ever set; the others stay empty ("unknown" to readers). */
export const CONDITION_TYPES = ["Ready", "DiskPressure", "MemoryPressure", "PIDPressure", "NetworkUnavailable"] as const;

export interface NodeSpecInput {
  nodeName: string;
  /** --node-ip; empty or undefined omits the InternalIP address. */
  nodeIp?: string;
  /** The port parsed out of --listen-addr. */
  kubeletPort: number;
  /** --node-cpu / --node-memory / --node-pods as Kubernetes quantity strings (already validated by the flags). */
  cpu: string;
  memory: string;
  pods: string;
  /** The --node-labels pairs as flags.ts parsed them, copied on top of the fixed labels (so they may override them). */
  extraLabels: Record<string, string>;
}

/** type / role / hostname, then --node-labels on top. */
export function nodeLabels(input: Pick<NodeSpecInput, "nodeName" | "extraLabels">): Record<string, string> {
  return {
    type: "virtual-kubelet",
    "kubernetes.io/role": "agent",
    "kubernetes.io/hostname": input.nodeName,
    ...input.extraLabels,
  };
}

/** InternalIP first (when set), then Hostname: clients that take the first address get the routable one. */
export function nodeAddresses(input: Pick<NodeSpecInput, "nodeName" | "nodeIp">): V1NodeStatus["addresses"] {
  const out: NonNullable<V1NodeStatus["addresses"]> = [];
  if (input.nodeIp) out.push({ type: "InternalIP", address: input.nodeIp });
  out.push({ type: "Hostname", address: input.nodeName });
  return out;
}

/** Capacity equals allocatable: a scheduling budget, not a measurement (zero would get every Pod rejected). */
export function nodeResources(input: Pick<NodeSpecInput, "cpu" | "memory" | "pods">): Record<string, string> {
  return { cpu: input.cpu, memory: input.memory, pods: input.pods };
}

function emptyConditions(): V1NodeCondition[] {
  // Empty status, as the Go library registers them; readiness fills in Ready.
  return CONDITION_TYPES.map((type) => ({ type, status: "" }) as V1NodeCondition);
}

/**
 * The status fields this daemon owns. `readySince` is when readiness was marked (undefined: not ready yet); it is
 * Ready's lastTransitionTime on every later push too, because a transition time that moved with each heartbeat
 * would tell readers the node had just flapped.
 */
export function nodeStatus(input: NodeSpecInput, readySince: Date | undefined, now: Date): V1NodeStatus {
  const resources = nodeResources(input);
  const conditions = emptyConditions();
  if (readySince) {
    conditions[0] = {
      type: "Ready",
      status: "True",
      reason: "KubeletReady",
      message: "Kubelet is ready",
      lastTransitionTime: readySince,
      lastHeartbeatTime: now,
    };
  }
  return {
    phase: readySince ? "Running" : "Pending",
    addresses: nodeAddresses(input),
    daemonEndpoints: { kubeletEndpoint: { Port: input.kubeletPort } },
    capacity: { ...resources },
    allocatable: { ...resources },
    conditions,
  };
}

/** The full object POSTed when no Node exists yet. */
export function buildNode(input: NodeSpecInput, now: Date): V1Node {
  return {
    apiVersion: "v1",
    kind: "Node",
    metadata: { name: input.nodeName, labels: nodeLabels(input) },
    spec: { taints: [{ ...PROVIDER_TAINT }] },
    status: nodeStatus(input, undefined, now),
  };
}
