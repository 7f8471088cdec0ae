// One real kube-apiserver per e2e file, prepared the way an operator installs vk-sandbox: every file of manifests/
// applied (the RBAC and the node admission policy), one ServiceAccount `sandbox-nodes/<node>` per node with its
// token in a kubeconfig (the daemon never runs as admin, and each node as itself), a minimal `Sandbox` CRD of
// agents.x-k8s.io for owners, and an audit log of every request the node identities make (the independent witness
// for the QPS/burst and idle-rate checks, and for "no request refused").
import { existsSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { V1Pod } from "@kubernetes/client-node";
import { startKubeApiserver, type TestCluster } from "../../kube/harness.ts";
import { kubectlBinary } from "../../kube/peers.ts";
import { waitFor } from "../../support/wait.ts";

const root = join(import.meta.dir, "..", "..", "..");
/** The namespace of the per-node ServiceAccounts (manifests/rbac.yaml), and their group. */
export const NODE_SA_NAMESPACE = "sandbox-nodes";
export const NODE_GROUP = `system:serviceaccounts:${NODE_SA_NAMESPACE}`;
/** The user a node's daemon authenticates as. */
export const nodeUser = (node: string) => `system:serviceaccount:${NODE_SA_NAMESPACE}:${node}`;
/** The node the default kubeconfig (`E2eCluster.kubeconfig`) speaks for. */
export const DEFAULT_NODE = "vk-e2e";

export const SANDBOX_CRD = {
  apiVersion: "apiextensions.k8s.io/v1",
  kind: "CustomResourceDefinition",
  metadata: { name: "sandboxes.agents.x-k8s.io" },
  spec: {
    group: "agents.x-k8s.io",
    scope: "Namespaced",
    names: { plural: "sandboxes", singular: "sandbox", kind: "Sandbox", listKind: "SandboxList" },
    versions: [
      {
        name: "v1beta1",
        served: true,
        storage: true,
        subresources: { status: {} },
        schema: { openAPIV3Schema: { type: "object", "x-kubernetes-preserve-unknown-fields": true } },
      },
    ],
  },
};

export interface E2eCluster {
  cluster: TestCluster;
  /** The kubeconfig of node DEFAULT_NODE's own ServiceAccount (nodeKubeconfig(DEFAULT_NODE)). */
  kubeconfig: string;
  /**
   * The kubeconfig of `node`'s own ServiceAccount `sandbox-nodes/<node>`, created on first use as an operator does
   * at install. Synchronous (kubectl, run to completion), so a daemon can be started with it in one call.
   */
  nodeKubeconfig(node: string): string;
  /** The bearer token in nodeKubeconfig(node). */
  nodeToken(node: string): string;
  auditPath: string;
  kube: Kube;
  stop(): Promise<void>;
}

export async function startE2eCluster(): Promise<E2eCluster> {
  const dir = mkdtempSync(join(tmpdir(), "vk-e2e-audit-"));
  const policy = join(dir, "audit-policy.yaml");
  const auditPath = join(dir, "audit.log");
  writeFileSync(
    policy,
    [
      "apiVersion: audit.k8s.io/v1",
      "kind: Policy",
      "omitStages: [RequestReceived, ResponseStarted]",
      "rules:",
      "- level: Metadata",
      `  userGroups: ["${NODE_GROUP}"]`,
      "- level: None",
      "",
    ].join("\n"),
  );
  const cluster = await startKubeApiserver({
    extraArgs: [`--audit-policy-file=${policy}`, `--audit-log-path=${auditPath}`, "--audit-log-mode=blocking"],
  });
  try {
    await cluster.createNamespace("sandbox-system");
    const manifests = join(root, "manifests");
    const docs: string[] = [];
    for (const dir of [manifests, join(manifests, "crds")]) {
      if (!existsSync(dir)) continue;
      for (const f of readdirSync(dir).sort()) {
        if (/\.ya?ml$/.test(f) && !/example/i.test(f)) docs.push(readFileSync(join(dir, f), "utf8"));
      }
    }
    if (!docs.some((d) => /kind:\s*ClusterRole\b/.test(d))) throw new Error("manifests/rbac.yaml with the vk-sandbox ClusterRole is missing");
    if (!docs.some((d) => /kind:\s*ValidatingAdmissionPolicy\b/.test(d))) throw new Error("manifests/node-admission.yaml is missing");
    for (const d of docs) await cluster.apply(d);
    await cluster.apply([SANDBOX_CRD]);
    await cluster.createNamespace("ns");
    const { kubeconfig: nodeKubeconfig, token: nodeToken } = nodeIdentities(cluster, await kubectlBinary());
    return { cluster, kubeconfig: nodeKubeconfig(DEFAULT_NODE), nodeKubeconfig, nodeToken, auditPath, kube: new Kube(cluster), stop: () => cluster.stop() };
  } catch (e) {
    await cluster.stop();
    throw e;
  }
}

export interface AuditEvent {
  verb: string;
  requestURI: string;
  user: { username: string };
  userAgent?: string;
  stageTimestamp: string;
  requestReceivedTimestamp: string;
  responseStatus?: { code?: number };
}

/** nodeKubeconfig and nodeToken of E2eCluster: one ServiceAccount and token per node name, cached. */
function nodeIdentities(cluster: TestCluster, kubectl: string): { kubeconfig(node: string): string; token(node: string): string } {
  const admin = cluster.kubeconfig({ auth: "admin-cert" });
  const made = new Map<string, { path: string; token: string }>();
  const run = (args: string[]) => {
    const r = Bun.spawnSync([kubectl, `--kubeconfig=${admin}`, "--namespace", NODE_SA_NAMESPACE, ...args], { stdout: "pipe", stderr: "pipe" });
    return { ok: r.exitCode === 0, out: r.stdout.toString().trim(), err: r.stderr.toString().trim() };
  };
  const identity = (node: string) => {
    const known = made.get(node);
    if (known) return known;
    const sa = run(["create", "serviceaccount", node]);
    if (!sa.ok && !/AlreadyExists/.test(sa.err)) throw new Error(`create ServiceAccount ${NODE_SA_NAMESPACE}/${node}: ${sa.err}`);
    const token = run(["create", "token", node, "--duration=7200s"]);
    if (!token.ok) throw new Error(`token for ${NODE_SA_NAMESPACE}/${node}: ${token.err}`);
    const made1 = { path: cluster.kubeconfig({ auth: "token", token: token.out }), token: token.out };
    made.set(node, made1);
    return made1;
  };
  return { kubeconfig: (node) => identity(node).path, token: (node) => identity(node).token };
}

/**
 * The node identities' completed requests (a watch appears when it ends). Use `requestReceivedTimestamp` for
 * timing and `responseStatus.code` for authorization.
 */
export function auditEvents(path: string): AuditEvent[] {
  if (!existsSync(path)) return [];
  // kube-apiserver appends lines while the test reads: the text after the last newline can be a line half written,
  // so only complete lines are read (the next read sees that one whole).
  const lines = readFileSync(path, "utf8").split("\n");
  lines.pop();
  return lines
    .filter(Boolean)
    .map((l) => JSON.parse(l) as AuditEvent)
    .filter((e) => e.user?.username?.startsWith(`system:serviceaccount:${NODE_SA_NAMESPACE}:`));
}

/**
 * The largest excess of requests over a token bucket's allowance: for every window [t_i, t_j] the count must stay
 * within burst + qps × (t_j − t_i). Returns the worst (count − allowance); ≤ 0 means the bucket held.
 * `slack` absorbs arrival jitter between the client's send and the server's receive timestamps.
 */
export function worstBucketExcess(timesMs: number[], qps: number, burst: number): number {
  const t = [...timesMs].sort((a, b) => a - b);
  let worst = -Infinity;
  for (let i = 0; i < t.length; i++) {
    for (let j = i; j < t.length; j++) {
      const excess = j - i + 1 - (burst + (qps * (t[j]! - t[i]!)) / 1000);
      if (excess > worst) worst = excess;
    }
  }
  return worst;
}

/**
 * How late the apiserver stamped requests while it ran: a probe identity of its own (`sandbox-nodes/<name>`, so the
 * audit log records it) asks `/version` every 25 ms, and each request's `requestReceivedTimestamp` less the time this
 * process sent it is its lag. The spread of those lags (the worst less the least) is how long the server, or this
 * process, stalled: on a machine whose cores are busy, that stall bunches requests a client's bucket released on time,
 * so a test of a client's rate allows it. Same machine, same clock: no offset to estimate.
 */
export function startStallProbe(e2e: E2eCluster, name = "stall-probe"): { stop(): Promise<{ stallMs: number; probes: number }> } {
  const token = e2e.nodeToken(name);
  const sent = new Map<number, number>();
  let stopped = false;
  const loop = (async () => {
    for (let i = 0; !stopped; i++) {
      sent.set(i, Date.now());
      try {
        await fetch(`${e2e.cluster.url}/version?probe=${i}`, {
          headers: { authorization: `Bearer ${token}` },
          tls: { ca: e2e.cluster.caPem },
          signal: AbortSignal.timeout(30_000),
        }).then((r) => r.arrayBuffer());
      } catch {
        // A probe that never arrived has no lag to read; the ones around it still do.
      }
      await Bun.sleep(25);
    }
  })();
  return {
    async stop() {
      stopped = true;
      await loop;
      const user = nodeUser(name);
      const lags: number[] = [];
      for (const e of auditEvents(e2e.auditPath)) {
        const m = e.user.username === user ? /[?&]probe=(\d+)/.exec(e.requestURI) : null;
        // The first request also opens the connection (TCP and TLS): its lag is no stall.
        const at = m && m[1] !== "0" ? sent.get(Number(m[1])) : undefined;
        if (at !== undefined) lags.push(Date.parse(e.requestReceivedTimestamp) - at);
      }
      if (lags.length === 0) throw new Error(`stall probe ${user}: none of its ${sent.size} requests is in the audit log ${e2e.auditPath}`);
      return { stallMs: Math.max(...lags) - Math.min(...lags), probes: lags.length };
    },
  };
}

/** Small admin-side helpers over the test cluster. */
export class Kube {
  constructor(readonly c: TestCluster) {}

  async req<T = unknown>(method: string, path: string, body?: unknown, contentType = "application/json"): Promise<{ status: number; body: T }> {
    const r = await this.c.adminFetch(path, {
      method,
      headers: body === undefined ? {} : { "content-type": contentType },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await r.text();
    let parsed: unknown;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = text; // "404 page not found" for a resource the server does not serve
    }
    return { status: r.status, body: parsed as T };
  }

  async ok<T = unknown>(method: string, path: string, body?: unknown): Promise<T> {
    const r = await this.req<T>(method, path, body);
    if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${JSON.stringify(r.body)}`);
    return r.body;
  }

  pod(ns: string, name: string): Promise<V1Pod | undefined> {
    return this.req<V1Pod>("GET", `/api/v1/namespaces/${ns}/pods/${name}`).then((r) => (r.status === 200 ? r.body : undefined));
  }

  async pods(ns: string): Promise<V1Pod[]> {
    return (await this.ok<{ items: V1Pod[] }>("GET", `/api/v1/namespaces/${ns}/pods`)).items;
  }

  createPod(pod: V1Pod): Promise<V1Pod> {
    return this.ok<V1Pod>("POST", `/api/v1/namespaces/${pod.metadata!.namespace}/pods`, pod);
  }

  deletePod(ns: string, name: string, graceSeconds?: number): Promise<unknown> {
    return this.req("DELETE", `/api/v1/namespaces/${ns}/pods/${name}`, graceSeconds === undefined ? undefined : { gracePeriodSeconds: graceSeconds });
  }

  createSandbox(ns: string, name: string): Promise<{ metadata: { uid: string; name: string } }> {
    return this.ok("POST", `/apis/agents.x-k8s.io/v1beta1/namespaces/${ns}/sandboxes`, {
      apiVersion: "agents.x-k8s.io/v1beta1",
      kind: "Sandbox",
      metadata: { name, namespace: ns },
      spec: {},
    });
  }

  deleteSandbox(ns: string, name: string): Promise<unknown> {
    return this.req("DELETE", `/apis/agents.x-k8s.io/v1beta1/namespaces/${ns}/sandboxes/${name}`);
  }

  node(name: string) {
    return this.req<{ metadata: { labels: Record<string, string> }; spec: unknown; status: any }>("GET", `/api/v1/nodes/${name}`);
  }

  async events(ns: string): Promise<Array<{ reason: string; type: string; involvedObject: { name: string }; source: { component: string } }>> {
    return (await this.ok<{ items: any[] }>("GET", `/api/v1/namespaces/${ns}/events`)).items;
  }
}

/** A sandbox Pod bound straight to the node (no scheduler runs in the test cluster). */
export function sandboxPod(
  name: string,
  node: string,
  o: { ns?: string; owner?: { name: string; uid: string }; annotations?: Record<string, string>; restartPolicy?: string; grace?: number } = {},
): V1Pod {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name,
      namespace: o.ns ?? "ns",
      annotations: { "sandbox.cocoonstack.io/template": "base", ...o.annotations },
      ownerReferences: o.owner
        ? [{ apiVersion: "agents.x-k8s.io/v1beta1", kind: "Sandbox", name: o.owner.name, uid: o.owner.uid, controller: true }]
        : undefined,
    },
    spec: {
      nodeName: node,
      automountServiceAccountToken: false,
      restartPolicy: o.restartPolicy ?? "Always",
      terminationGracePeriodSeconds: o.grace ?? 1,
      tolerations: [{ key: "virtual-kubelet.io/provider", operator: "Exists", effect: "NoSchedule" }],
      containers: [{ name: "main", image: "sandbox" }],
    },
  };
}

/** Poll a condition against the real apiserver (there is nothing to inject here), bounded. */
/** The annotation holding the id of the sandbox claimed for a Pod. */
export const CLAIM_ID = "sandbox.cocoonstack.io/claim-id";

/** Waits until the Pod is Running with a claim id, and returns it. */
export const runningWithClaim = (kube: Kube, ns: string, name: string, timeoutMs = 30_000) =>
  waitFor(
    `${name} Running`,
    async () => {
      const p = await kube.pod(ns, name);
      return p?.status?.phase === "Running" && p.metadata?.annotations?.[CLAIM_ID] ? p : undefined;
    },
    timeoutMs,
  );
