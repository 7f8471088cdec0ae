// The inventory as the product writes it: a real vk-sandbox process publishes its node's NodeInventory (every 2 s)
// for a simulated sandboxd, and kubectl, through the aggregator, sees a Pod-driven claim and its release appear
// and disappear on a `get -w`, with the spec's columns on `get -A`.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { startSandboxdSim, type SandboxdSim } from "#services/sandboxd-sim/sim.ts";
import { SandboxdClient } from "#shared/sandboxd/client.ts";
import { Daemon } from "../../e2e/vk-sandbox/daemon.ts";
import { kubectl, kubectlStream } from "../../kube/kubectl.ts";
import { freePorts } from "../../kube/ports.ts";
import { type ApiserverProcess, type Stack, startStack } from "./fixture.ts";
import { waitFor } from "#tests/support/wait.ts";

const REPO = join(import.meta.dir, "../../..");
const ROOT = "vk-root-token";
const NODE = "vk-node-1";
let stack: Stack;
let sim: SandboxdSim;
let daemon: Daemon;
let server: ApiserverProcess;

beforeAll(async () => {
  stack = await startStack();
  await stack.cluster.apply(readFileSync(join(REPO, "manifests/rbac.yaml"), "utf8"));
  await stack.cluster.createNamespace("kube-node-lease");
  sim = await startSandboxdSim({ rootToken: ROOT, pools: ["base:24.04/none/small=3"] });
  // The node's own ServiceAccount (manifests/rbac.yaml: one per node in sandbox-nodes).
  await stack.cluster.apply([{ apiVersion: "v1", kind: "ServiceAccount", metadata: { name: NODE, namespace: "sandbox-nodes" } }]);
  const token = await stack.cluster.serviceAccountToken("sandbox-nodes", NODE, 3600);
  const kubeconfig = stack.cluster.kubeconfig({ auth: "token", token, path: join(stack.dir, "vk.kubeconfig") });
  const [kubelet] = freePorts(1);
  const tokenFile = join(stack.dir, "vk-token");
  writeFileSync(tokenFile, ROOT);
  daemon = Daemon.start({
    args: [
      `--node-name=${NODE}`,
      "--node-ip=127.0.0.1",
      `--listen-addr=127.0.0.1:${kubelet}`,
      `--sandboxd-url=${sim.url}`,
      `--sandboxd-token-file=${tokenFile}`,
      `--state-path=${join(stack.dir, "vk-state", "claims.json")}`,
      "--publish-inventory",
      "--publish-interval=2s",
    ],
    env: { KUBECONFIG: kubeconfig },
  });
  server = await stack.startServer({ args: [`--sandboxd-token=${ROOT}`, "--enable-warm-pool-driver=false"] });
  await stack.register(server.port);
  await waitFor(`vk-sandbox to publish its NodeInventory:\n${daemon?.log()}`, async () => {
    const r = await stack.cluster.adminFetch(`/apis/sandbox.cocoonstack.io/v1beta1/nodeinventories/${NODE}`);
    await r.body?.cancel();
    return r.ok ? true : undefined;
  }, 60_000);
}, 120_000);

afterAll(async () => {
  await server?.stop();
  daemon?.proc.kill("SIGTERM");
  await daemon?.proc.exited;
  await sim?.stop();
  await stack?.stop();
});

const pod = (name: string) =>
  JSON.stringify({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace: "default", annotations: { "sandbox.cocoonstack.io/template": "base:24.04" } },
    spec: {
      nodeName: NODE,
      tolerations: [{ key: "virtual-kubelet.io/provider", operator: "Equal", value: "sandboxd", effect: "NoSchedule" }],
      containers: [{ name: "sandbox", image: "base:24.04" }],
    },
  });

test("a claim and a release made through a Pod on a real vk-sandbox node show up on kubectl get -w as ADDED and DELETED", async () => {
  const w = await kubectlStream(["get", "sandboxes", "-A", "-w", "--output-watch-events"], { kubeconfig: stack.admin });
  try {
    await Bun.sleep(1500);
    const created = await kubectl(["create", "-f", "-"], { kubeconfig: stack.admin, stdin: pod("vk-pod") });
    expect(created.stderr).toBe("");
    // vk-sandbox claims (claim_ref default/vk-pod), then publishes within its 2 s interval.
    const added = await w.waitFor(/ADDED\s+default\s+vk-pod/, 20_000);
    // The Table's cells (docs/api.md "Table output"): phase, node, template, age.
    expect(added).toMatch(new RegExp(`vk-pod\\s+Running\\s+Running\\s+${NODE}\\s+\\S+\\s+\\d+[smhdy]`));
    const list = await kubectl(["get", "sandboxes", "-A"], { kubeconfig: stack.admin });
    expect(list.stdout.split("\n")[0]).toMatch(/^NAMESPACE\s+NAME\s+PHASE\s+MODE\s+NODE\s+TEMPLATE\s+AGE$/);
    expect(list.stdout).toMatch(new RegExp(`default\\s+vk-pod\\s+Running\\s+Running\\s+${NODE}\\s`));
    const one = JSON.parse((await kubectl(["get", "sandbox", "vk-pod", "-o", "json"], { kubeconfig: stack.admin })).stdout);
    expect(one.status.nodeName).toBe(NODE);
    expect(one.metadata.annotations["sandbox.cocoonstack.io/claim-id"]).toBe(sim.claims()[0]!.id);
    await kubectl(["delete", "pod", "vk-pod", "--wait=false"], { kubeconfig: stack.admin });
    await w.waitFor(/DELETED\s+default\s+vk-pod/, 30_000);
    expect(sim.claims()).toHaveLength(0);
  } finally {
    await w.stop();
  }
}, 90_000);

// Issue 22 case 3: the sandboxes API must not be a way around a Pod's RBAC. A user holding every sandboxes verb
// in the namespace but no pod permission forked a Pod-backed sandbox and received the clone's address and token.
test("a Pod-backed sandbox: fork needs create pods/exec, delete needs delete pods, pause needs update pods, on top of the sandboxes verbs", async () => {
  const user = stack.cluster.user.name;
  const userKubeconfig = stack.cluster.kubeconfig({ auth: "user-token", path: join(stack.dir, "pod-guard-user.kubeconfig") });
  await stack.cluster.apply(`
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: sandbox-all, namespace: default}
rules: [{apiGroups: [agents.x-k8s.io], resources: [sandboxes, sandboxes/fork, sandboxes/snapshot, sandboxes/pause, sandboxes/resume], verbs: [get, list, create, delete]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: sandbox-all, namespace: default}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: sandbox-all}
subjects: [{kind: User, name: ${user}}]
`);
  const created = await kubectl(["create", "-f", "-"], { kubeconfig: stack.admin, stdin: pod("guarded-pod") });
  expect(created.stderr).toBe("");
  await waitFor("the Pod's sandbox in the aggregated API", async () => {
    const r = await kubectl(["get", "sandbox", "guarded-pod", "-o", "name"], { kubeconfig: userKubeconfig });
    return r.code === 0 ? r : undefined;
  }, 30_000);
  const claimsBefore = sim.claims().length;
  const verb = (v: string) =>
    kubectl(["create", "--raw", `/apis/agents.x-k8s.io/v1beta1/namespaces/default/sandboxes/guarded-pod/${v}`, "-f", "-"], { kubeconfig: userKubeconfig, stdin: "{}" });

  const fork = await verb("fork");
  expect(fork.code).not.toBe(0);
  expect(fork.stderr).toContain("create pods/exec");
  expect(fork.stdout).not.toContain("token");
  const snapshot = await verb("snapshot");
  expect(snapshot.stderr).toContain("create pods/exec");
  const pause = await verb("pause");
  expect(pause.stderr).toContain("update pods");
  const del = await kubectl(["delete", "sandbox", "guarded-pod", "--wait=false"], { kubeconfig: userKubeconfig });
  expect(del.code).not.toBe(0);
  expect(del.stderr).toContain("delete pods");
  // Nothing reached the node: no clone, and the Pod's VM is still claimed and running.
  expect(sim.claims()).toHaveLength(claimsBefore);
  expect(sim.claims().some((c) => c.claimRef === "default/guarded-pod" && c.state === "running")).toBe(true);

  // With the pod permission as well, the same fork goes through.
  await stack.cluster.apply(`
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: pod-exec, namespace: default}
rules: [{apiGroups: [""], resources: [pods/exec], verbs: [create]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: pod-exec, namespace: default}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: pod-exec}
subjects: [{kind: User, name: ${user}}]
`);
  const allowed = await waitFor("fork with pods/exec granted", async () => {
    const r = await verb("fork");
    return r.code === 0 ? r : undefined;
  }, 20_000);
  const result = JSON.parse(allowed.stdout) as { kind: string; children: { sandboxID: string }[] };
  expect(result.kind).toBe("SandboxForkResult");
  expect(result.children).toHaveLength(1);
  expect(sim.claims()).toHaveLength(claimsBefore + 1);
  // The clone inherits the Pod's claim stamp (sandboxd.md: fork children inherit metadata), so the e2b surface never
  // shows it; a named snapshot is stamped `pod:<ns>/<name>`, a name in no e2b namespace.
  const child = sim.claims().find((c) => c.id === result.children[0]!.sandboxID);
  expect(child?.metadata?.["vk-sandbox.pod-uid"]).toBeTruthy();
  const snap = await kubectl(["create", "--raw", "/apis/agents.x-k8s.io/v1beta1/namespaces/default/sandboxes/guarded-pod/snapshot", "-f", "-"], { kubeconfig: userKubeconfig, stdin: '{"name":"before-upgrade"}' });
  expect(snap.code).toBe(0);
  const snapshotID = (JSON.parse(snap.stdout) as { snapshotID: string }).snapshotID;
  const checkpoints = await new SandboxdClient({ baseUrl: sim.url, token: ROOT }).listCheckpoints();
  expect(checkpoints.find((c) => c.id === snapshotID)?.name).toBe("pod:default/before-upgrade");
  await kubectl(["delete", "pod", "guarded-pod", "--wait=false"], { kubeconfig: stack.admin });
}, 120_000);
