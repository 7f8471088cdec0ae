// Shared set-up for the vk-sandbox node, lease and inventory integration tests: one real kube-apiserver per test
// file, manifests/rbac.yaml (and the NodeInventory CRD) applied, and two clients: the cluster admin (to look and to
// meddle as an operator would) and the vk-sandbox ServiceAccount token the manifest binds (to act as the daemon
// does, which proves the manifest grants what these modules call). It sits here, not beside the integration tests,
// only because this directory is the node module's test home; it runs nothing on import.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { KubeClient } from "../../../../../shared/kube/client.ts";
import { startKubeApiserver, type TestCluster } from "../../../../kube/harness.ts";
import type { NodeSpecInput } from "../../../../../services/vk-sandbox/node/index.ts";
import { parseVkSandboxFlags } from "../../../../../services/vk-sandbox/flags.ts";

const root = join(import.meta.dir, "..", "..", "..", "..", "..");

export interface KubeFixture {
  cluster: TestCluster;
  admin: KubeClient;
  daemon: KubeClient;
  stop(): Promise<void>;
}

export async function startKubeFixture(o: { crd?: boolean } = {}): Promise<KubeFixture> {
  const cluster = await startKubeApiserver();
  try {
    await cluster.apply(readFileSync(join(root, "manifests", "rbac.yaml"), "utf8"));
    if (o.crd) await cluster.apply(readFileSync(join(root, "manifests", "crds", "nodeinventories.sandbox.cocoonstack.io.yaml"), "utf8"));
    await cluster.createNamespace("kube-node-lease");
    const token = await cluster.serviceAccountToken("sandbox-system", "vk-sandbox", 3600);
    const admin = new KubeClient({ server: cluster.url, caPem: cluster.caPem, certPem: cluster.admin.certPem, keyPem: cluster.admin.keyPem });
    const daemon = new KubeClient({ server: cluster.url, caPem: cluster.caPem, token });
    return { cluster, admin, daemon, stop: () => cluster.stop() };
  } catch (e) {
    await cluster.stop();
    throw e;
  }
}

/** The node inputs exactly as the daemon derives them from its flags (defaults unless argv says otherwise). */
export function nodeSpecFromFlags(argv: string[] = [], env: Record<string, string> = {}): NodeSpecInput {
  const out = parseVkSandboxFlags(argv, env);
  if (out.kind !== "run") throw new Error(`flags: ${out.kind}`);
  const c = out.config;
  return {
    nodeName: c.nodeName,
    nodeIp: c.nodeIp,
    kubeletPort: c.listenPort,
    cpu: c.nodeCpu.string,
    memory: c.nodeMemory.string,
    pods: c.nodePods.string,
    extraLabels: c.nodeLabels,
  };
}

export const quietLog = { info() {}, warn() {}, error() {}, debug() {} };

/** Polls `fn` until it returns a truthy value; throws after `ms`. */
export async function eventually<T>(fn: () => Promise<T | undefined | false>, ms = 30_000, every = 100): Promise<T> {
  const end = Date.now() + ms;
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > end) throw new Error(`condition not met within ${ms} ms${last ? `: ${(last as Error).message}` : ""}`);
    await Bun.sleep(every);
  }
}
