// Shared set-up for the vk-sandbox node, lease and inventory integration tests: one real kube-apiserver per test
// file, manifests/rbac.yaml (and the NodeInventory CRD) applied, and two clients: the cluster admin (to look and to
// meddle as an operator would) and a node ServiceAccount token the manifest binds (sandbox-nodes/vk-fixture, to act
// as the daemon does, which proves the manifest grants what these modules call). The node admission policy
// (manifests/node-admission.yaml) is not applied here: one identity serves every node name a test uses; the e2e
// suite runs each node as itself under the policy. Bounded waits come from tests/support/wait.ts.
// It runs nothing on import; `useKubeFixture()` registers the file's beforeAll/afterAll.
import { afterAll, beforeAll } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { KubeClient } from "#shared/kube/client.ts";
import { startKubeApiserver, type TestCluster } from "../../kube/harness.ts";
import type { NodeSpecInput } from "#services/vk-sandbox/node/index.ts";
import { parseVkSandboxFlags } from "#services/vk-sandbox/flags.ts";

const root = join(import.meta.dir, "..", "..", "..");

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
    if (o.crd) for (const f of ["nodeinventories", "nodeinventoryshards"]) await cluster.apply(readFileSync(join(root, "manifests", "crds", `${f}.sandbox.cocoonstack.io.yaml`), "utf8"));
    await cluster.createNamespace("kube-node-lease");
    await cluster.apply([{ apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "vk-fixture", namespace: "sandbox-nodes" } }]);
    const token = await cluster.serviceAccountToken("sandbox-nodes", "vk-fixture", 3600);
    const admin = new KubeClient({ server: cluster.url, caPem: cluster.caPem, certPem: cluster.admin.certPem, keyPem: cluster.admin.keyPem });
    const daemon = new KubeClient({ server: cluster.url, caPem: cluster.caPem, token });
    return { cluster, admin, daemon, stop: () => cluster.stop() };
  } catch (e) {
    await cluster.stop();
    throw e;
  }
}

export interface FileKubeFixture extends KubeFixture {
  /** Controllers and loops a test started; afterAll stops them all before it stops the apiserver. */
  readonly running: { stop(): Promise<void> }[];
}

/**
 * Registers the beforeAll/afterAll a test file shares: one apiserver for the file (180 s to start), and on the way
 * out every loop in `running` stopped, then the apiserver. The returned object reads through to the fixture
 * beforeAll started, so use it inside tests and hooks only.
 */
export function useKubeFixture(o: { crd?: boolean } = {}): FileKubeFixture {
  let k: KubeFixture | undefined;
  const running: { stop(): Promise<void> }[] = [];
  const started = (): KubeFixture => {
    if (!k) throw new Error("the kube fixture is not started: use it inside tests, after beforeAll");
    return k;
  };
  beforeAll(async () => {
    k = await startKubeFixture(o);
  }, 180_000);
  afterAll(async () => {
    await Promise.all(running.map((r) => r.stop()));
    await k?.stop();
  });
  return {
    get cluster() {
      return started().cluster;
    },
    get admin() {
      return started().admin;
    },
    get daemon() {
      return started().daemon;
    },
    stop: () => started().stop(),
    running,
  };
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
