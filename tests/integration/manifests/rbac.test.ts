// manifests/rbac.yaml and manifests/node-admission.yaml on a real kube-apiserver (issue 22 cases 2 and 4): a strict
// server-side dry run accepts every object with no warning (kube-apiserver compiles the policy's CEL on admission,
// so an expression that does not compile fails here; the typeChecking status needs kube-controller-manager, which
// the harness does not run).
// What the policy refuses and allows, with the daemons running under it, is tests/e2e/vk-sandbox/node-identity.test.ts.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { startKubeApiserver, type TestCluster } from "../../kube/harness.ts";
import { kubectl } from "../../kube/kubectl.ts";

const root = join(import.meta.dir, "..", "..", "..");
const files = ["manifests/rbac.yaml", "manifests/node-admission.yaml", "manifests/crds/nodeinventories.sandbox.cocoonstack.io.yaml", "manifests/crds/nodeinventoryshards.sandbox.cocoonstack.io.yaml"].map((f) => join(root, f));
let cluster: TestCluster;
let kubeconfig: string;

beforeAll(async () => {
  cluster = await startKubeApiserver();
  kubeconfig = cluster.kubeconfig();
}, 120_000);

afterAll(async () => {
  await cluster?.stop();
});

describe("the node install's RBAC and admission policy", () => {
  test("kubectl apply --dry-run=server --validate=strict accepts every object, with no warning", async () => {
    const r = await kubectl(["apply", "--dry-run=server", "--validate=strict", ...files.flatMap((f) => ["-f", f])], { kubeconfig });
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    for (const o of [
      "namespace/sandbox-nodes",
      "clusterrole.rbac.authorization.k8s.io/vk-sandbox-node",
      "clusterrolebinding.rbac.authorization.k8s.io/vk-sandbox-node",
      "role.rbac.authorization.k8s.io/vk-sandbox-node-lease",
      "rolebinding.rbac.authorization.k8s.io/vk-sandbox-node-lease",
      "validatingadmissionpolicy.admissionregistration.k8s.io/vk-sandbox-node-restriction",
      "validatingadmissionpolicybinding.admissionregistration.k8s.io/vk-sandbox-node-restriction",
      "validatingadmissionpolicy.admissionregistration.k8s.io/vk-sandbox-node-networks",
      "validatingadmissionpolicybinding.admissionregistration.k8s.io/vk-sandbox-node-networks",
    ]) {
      expect(r.stdout).toContain(`${o} created (server dry run)`);
    }
  }, 60_000);

  test("the node-networks example is a valid params object in the namespace rbac.yaml creates", async () => {
    expect((await kubectl(["apply", "-f", files[0]!], { kubeconfig })).code).toBe(0);
    const r = await kubectl(["apply", "--dry-run=server", "--validate=strict", "-f", join(root, "manifests/node-networks.example.yaml")], { kubeconfig });
    expect(r.stderr).toBe("");
    expect(r.stdout).toContain("configmap/vk-sandbox-node-networks created (server dry run)");
  }, 60_000);
});
