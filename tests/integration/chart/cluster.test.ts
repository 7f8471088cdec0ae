// The chart against a real kube-apiserver: every rendered object passes a strict server-side dry run (cert-manager
// and Prometheus Operator kinds excepted: their CRDs are not in the test cluster), a real `helm install` creates
// the release and a mistyped value stops `helm install` before anything is created, and the RBAC the chart binds
// lets the apiserver's and the proxy's ServiceAccounts make exactly the calls their code makes (real requests under
// their own tokens), and no more.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { startKubeApiserver, type TestCluster } from "#tests/kube/harness.ts";
import { E2B, NAMESPACE, POOL_FIXTURES, at, chartDir, helm, identity, merge, render, root, type KubeObject, type Values } from "./helm.ts";

/** Where each kind the chart renders is served: [group/version path, plural, namespaced]. */
const RESOURCES: Record<string, [string, string, boolean]> = {
  CustomResourceDefinition: ["/apis/apiextensions.k8s.io/v1", "customresourcedefinitions", false],
  ServiceAccount: ["/api/v1", "serviceaccounts", true],
  Secret: ["/api/v1", "secrets", true],
  ConfigMap: ["/api/v1", "configmaps", true],
  Service: ["/api/v1", "services", true],
  ClusterRole: ["/apis/rbac.authorization.k8s.io/v1", "clusterroles", false],
  ClusterRoleBinding: ["/apis/rbac.authorization.k8s.io/v1", "clusterrolebindings", false],
  Role: ["/apis/rbac.authorization.k8s.io/v1", "roles", true],
  RoleBinding: ["/apis/rbac.authorization.k8s.io/v1", "rolebindings", true],
  Deployment: ["/apis/apps/v1", "deployments", true],
  PodDisruptionBudget: ["/apis/policy/v1", "poddisruptionbudgets", true],
  APIService: ["/apis/apiregistration.k8s.io/v1", "apiservices", false],
  ValidatingAdmissionPolicy: ["/apis/admissionregistration.k8s.io/v1", "validatingadmissionpolicies", false],
  ValidatingAdmissionPolicyBinding: ["/apis/admissionregistration.k8s.io/v1", "validatingadmissionpolicybindings", false],
};
const NOT_IN_TEST_CLUSTER = /^(cert-manager\.io|monitoring\.coreos\.com)\//;

let cluster: TestCluster;
let kubeconfig: string;

beforeAll(async () => {
  cluster = await startKubeApiserver();
  kubeconfig = cluster.kubeconfig();
  await cluster.createNamespace(NAMESPACE);
  await cluster.createNamespace("team");
  for (const f of readdirSync(join(root, "manifests", "crds")).sort()) {
    await cluster.apply(readFileSync(join(root, "manifests", "crds", f), "utf8"));
  }
}, 120_000);

afterAll(async () => {
  await cluster?.stop();
});

const json = (body: unknown): RequestInit => ({
  headers: { "content-type": "application/json" },
  body: JSON.stringify(body),
});

/** Server-side apply with dryRun=All: the apiserver runs admission, defaulting and validation and stores nothing. */
async function dryRunApply(o: KubeObject): Promise<Response> {
  const r = RESOURCES[o.kind];
  if (!r) throw new Error(`no resource path for kind ${o.kind}`);
  const [gv, plural, namespaced] = r;
  const path = `${gv}${namespaced ? `/namespaces/${o.metadata.namespace}` : ""}/${plural}/${o.metadata.name}`;
  return cluster.adminFetch(`${path}?dryRun=All&fieldManager=chart-test&force=true&fieldValidation=Strict`, {
    method: "PATCH",
    headers: { "content-type": "application/apply-patch+yaml" },
    body: JSON.stringify(o),
  });
}

describe("server-side dry run, strict field validation", () => {
  const renders: [string, Values][] = [
    ["default", {}],
    ["e2b, envd secret rendered, aliases, builds, proxy TLS", merge(E2B, at("apiserver.e2b", { envdSecret: { value: "s" }, templateAliases: "base img", builds: { enabled: true } }), at("envdProxy.tlsSecretName", "w"))],
    [
      "builds with the directory store on a claim, IRSA annotation",
      merge(E2B, at("apiserver.e2b.builds", { enabled: true, dir: { enabled: true, existingClaim: "e2b-builds" } }), at("apiserver.serviceAccount.annotations", { "eks.amazonaws.com/role-arn": "arn:aws:iam::123456789012:role/b" })),
    ],
    [
      "builds with the S3 store and static keys from a Secret",
      merge(E2B, at("apiserver.e2b.builds", { enabled: true, s3: { bucket: "e2b-uploads", prefix: "p", endpoint: "https://s3.example.com", region: "eu-west-1", forcePathStyle: true, credentialsSecret: { name: "s3-keys" } } })),
    ],
    ["one replica, builds with an emptyDir directory store", merge(E2B, at("apiserver.replicaCount", 1), at("apiserver.e2b.builds", { enabled: true, dir: { enabled: true, sizeLimit: "5Gi" } }))],
    ["no driver, no cert-manager", merge(at("apiserver.warmPoolDriver", false), at("certManager", { enabled: false, caBundle: "Zm9v" }))],
    [
      "placement, pull secrets and annotations",
      merge(
        at("apiserver", {
          nodeSelector: { "kubernetes.io/os": "linux" },
          tolerations: [{ key: "dedicated", operator: "Equal", value: "control-plane", effect: "NoSchedule" }],
          affinity: { podAntiAffinity: { preferredDuringSchedulingIgnoredDuringExecution: [{ weight: 1, podAffinityTerm: { topologyKey: "topology.kubernetes.io/zone", labelSelector: { matchLabels: { "app.kubernetes.io/name": "sandbox-apiserver" } } } }] } },
          priorityClassName: "system-cluster-critical",
          podAnnotations: { "example.com/team": "platform" },
        }),
        at("imagePullSecrets", [{ name: "regcred" }]),
      ),
    ],
  ];
  for (const [name, values] of renders) {
    test(`${name}: every object is accepted as written`, async () => {
      const objects = await render(merge(values, at("monitoring", { serviceMonitor: { enabled: true }, prometheusRule: { enabled: true } })));
      const checked: string[] = [];
      for (const o of objects) {
        if (NOT_IN_TEST_CLUSTER.test(o.apiVersion)) continue;
        const r = await dryRunApply(o);
        const body = await r.text();
        expect(`${identity(o)}: ${r.status} ${r.ok ? "" : body}`).toMatch(new RegExp(`^${identity(o)}: 20[01] $`));
        expect(r.headers.get("warning") ?? "").toBe("");
        checked.push(identity(o));
      }
      expect(checked.length).toBeGreaterThanOrEqual(objects.filter((o) => !NOT_IN_TEST_CLUSTER.test(o.apiVersion)).length);
    });
  }
});

describe("helm install on the real apiserver", () => {
  test("a mistyped value stops helm install before anything is created", async () => {
    const r = await helm(["install", "bad", chartDir, "--namespace", NAMESPACE, "--kubeconfig", kubeconfig], at("apiserver.replicaCount", "two"));
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain("values don't meet the specifications of the schema");
    expect(r.stderr).toContain("/apiserver/replicaCount");
    const list = await helm(["list", "--all-namespaces", "--all", "--short", "--kubeconfig", kubeconfig]);
    expect(list.stdout.trim()).toBe("");
    expect((await cluster.adminFetch(`/apis/apps/v1/namespaces/${NAMESPACE}/deployments/sandbox-apiserver`)).status).toBe(404);
  });

  test("installs the e2b configuration (cert-manager off) and every object exists where the chart says", async () => {
    const caBundle = Buffer.from(cluster.caPem).toString("base64");
    const values = merge(E2B, at("apiserver.e2b.envdSecret", { value: "envd-key", secretName: "" }), at("certManager", { enabled: false, caBundle }));
    const r = await helm(["install", "sandbox-operator", chartDir, "--namespace", NAMESPACE, "--kubeconfig", kubeconfig], values);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("STATUS: deployed");
    // NOTES.txt tells the operator where the e2b surface and the data plane are.
    expect(r.stdout).toContain(`E2B_API_URL=http://sandbox-apiserver-e2b.${NAMESPACE}.svc`);
    expect(r.stdout).toContain("E2B_DOMAIN=sandbox.example.com");
    // Issue 27: without node networks a node identity chooses where the root token goes; the notes say so, with the fix.
    expect(r.stdout).toContain("WARNING: inventory.trustedNetworks is empty. sandbox-apiserver and sandbox-envd-proxy send the fleet's\nsandboxd root token");
    expect(r.stdout).toContain("a node token used before the\nreal daemon registers can point the root token at a host of its own");
    expect(r.stdout).toContain("ConfigMap sandbox-nodes/vk-sandbox-node-networks, key nodeNetworks");
    expect(r.stdout).toContain(`helm upgrade sandbox-operator <chart> -n ${NAMESPACE} --reuse-values --set 'inventory.trustedNetworks={10.20.0.0/16}'`);
    // With the node network set, the same release's notes carry no warning (a server-side dry run: nothing changes).
    const networked = await helm(["upgrade", "sandbox-operator", chartDir, "--namespace", NAMESPACE, "--kubeconfig", kubeconfig, "--dry-run=server"], merge(values, at("inventory.trustedNetworks", ["10.20.0.0/16"])));
    expect([networked.code, networked.stderr]).toEqual([0, ""]);
    expect(networked.stdout).toContain("kubectl get nodeinventories");
    expect(networked.stdout).not.toContain("WARNING");
    expect(networked.stdout).toContain("- --inventory-trusted-networks=10.20.0.0/16");
    const expected = await render(values);
    expect(expected).toHaveLength(31 - 4); // certManager off drops the four cert-manager objects (31: seed 003's 23 and the eight objects beyond it, chart/README.md "Beyond seed 003")
    for (const o of expected) {
      const [gv, plural, namespaced] = RESOURCES[o.kind]!;
      const got = await cluster.adminFetch(`${gv}${namespaced ? `/namespaces/${o.metadata.namespace}` : ""}/${plural}/${o.metadata.name}`);
      expect(`${identity(o)}: ${got.status}`).toBe(`${identity(o)}: 200`);
    }
  }, 60_000);
});

describe("RBAC under the chart's ServiceAccounts (after the install above)", () => {
  type Call = {
    (path: string, init?: RequestInit): Promise<number>;
    (path: string, init: RequestInit, full: true): Promise<{ status: number; body: unknown }>;
  };
  async function as(sa: string): Promise<Call> {
    const token = await cluster.serviceAccountToken(NAMESPACE, sa, 600);
    const send = async (path: string, init: RequestInit = {}): Promise<{ status: number; body: unknown }> => {
      // As client-go does, a 429 (a CRD's storage re-initialising after helm touched it) is retried after its delay.
      for (let attempt = 1; ; attempt++) {
        const r = await fetch(`${cluster.url}${path}`, {
          ...init,
          headers: { ...(init.headers as Record<string, string>), authorization: `Bearer ${token}` },
          tls: { ca: cluster.caPem },
        });
        const text = await r.text();
        if (r.status !== 429 || attempt === 10) return { status: r.status, body: text ? (JSON.parse(text) as unknown) : undefined };
        await Bun.sleep(Number(r.headers.get("retry-after") ?? "1") * 1000);
      }
    };
    return (async (path: string, init: RequestInit = {}, full?: true) => {
      const r = await send(path, init);
      return full ? r : r.status;
    }) as Call;
  }

  const pools = "/apis/extensions.agents.x-k8s.io/v1beta1";
  const inventories = "/apis/sandbox.cocoonstack.io/v1beta1/nodeinventories";

  beforeAll(async () => {
    await cluster.apply(POOL_FIXTURES);
  });

  test("sandbox-apiserver: inventory informer, driver reads and status write-back, leader election, delegated auth", async () => {
    const call = await as("sandbox-apiserver");
    // NodeInventory informer: LIST, then WATCH; and the Node informer of the inventory trust check.
    expect(await call(inventories)).toBe(200);
    expect(await call(`${inventories}?watch=1&timeoutSeconds=1`)).toBe(200);
    expect(await call("/api/v1/nodes")).toBe(200);
    expect(await call("/api/v1/nodes?watch=1&timeoutSeconds=1")).toBe(200);
    expect(await call(`${inventories}/node-a`)).toBe(404); // allowed, just absent
    // Warm-pool driver: pools and templates in all namespaces, a template in the pool's namespace.
    expect(await call(`${pools}/sandboxwarmpools`)).toBe(200);
    expect(await call(`${pools}/sandboxwarmpools?watch=1&timeoutSeconds=1`)).toBe(200);
    expect(await call(`${pools}/sandboxtemplates`)).toBe(200);
    expect(await call(`${pools}/namespaces/team/sandboxtemplates/python`)).toBe(200);
    expect(
      await call(`${pools}/namespaces/team/sandboxwarmpools/py/status`, {
        method: "PATCH",
        headers: { "content-type": "application/merge-patch+json" },
        body: JSON.stringify({ status: { replicas: 2, readyReplicas: 2, selector: "agents.x-k8s.io/warm-pool=py" } }),
      }),
    ).toBe(200);
    // Leader election in the release namespace, and its Events.
    const lease = {
      apiVersion: "coordination.k8s.io/v1",
      kind: "Lease",
      metadata: { name: "cocoon-warmpool-driver", namespace: NAMESPACE },
      spec: { holderIdentity: "replica-1", leaseDurationSeconds: 15 },
    };
    const leases = `/apis/coordination.k8s.io/v1/namespaces/${NAMESPACE}/leases`;
    expect(await call(leases, { method: "POST", ...json(lease) })).toBe(201);
    const got = await call(`${leases}/cocoon-warmpool-driver`, {}, true);
    expect(got.status).toBe(200);
    // leader.ts renews with a PUT of the object it read (never a PATCH).
    const renewed = { ...(got.body as object), spec: { holderIdentity: "replica-2", leaseDurationSeconds: 15 } };
    expect(await call(`${leases}/cocoon-warmpool-driver`, { method: "PUT", ...json(renewed) })).toBe(200);
    expect(
      await call(`/api/v1/namespaces/${NAMESPACE}/events`, {
        method: "POST",
        ...json({
          apiVersion: "v1",
          kind: "Event",
          metadata: { name: "driver.1", namespace: NAMESPACE },
          involvedObject: { kind: "Lease", name: "cocoon-warmpool-driver", namespace: NAMESPACE },
          reason: "LeaderElection",
          message: "replica-1 became leader",
          type: "Normal",
        }),
      }),
    ).toBe(201);
    // Delegated authentication and authorization, and the front proxy's CA in kube-system.
    expect(
      await call("/apis/authentication.k8s.io/v1/tokenreviews", {
        method: "POST",
        ...json({ apiVersion: "authentication.k8s.io/v1", kind: "TokenReview", spec: { token: "not-a-token" } }),
      }),
    ).toBe(201);
    expect(
      await call("/apis/authorization.k8s.io/v1/subjectaccessreviews", {
        method: "POST",
        ...json({
          apiVersion: "authorization.k8s.io/v1",
          kind: "SubjectAccessReview",
          spec: { user: "alice", resourceAttributes: { group: "agents.x-k8s.io", resource: "sandboxes", verb: "list" } },
        }),
      }),
    ).toBe(201);
    expect(await call("/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication")).toBe(200);
    // A named Pod, to tell a Pod-backed sandbox (its mutations need the pod permission too): allowed, and absent.
    expect(await call("/api/v1/namespaces/team/pods/no-such-pod")).toBe(404);
  });

  test("sandbox-apiserver: nothing beyond that", async () => {
    const call = await as("sandbox-apiserver");
    expect(await call(inventories, { method: "POST", ...json({ apiVersion: "sandbox.cocoonstack.io/v1beta1", kind: "NodeInventory", metadata: { name: "x" }, node: "x" }) })).toBe(403);
    expect(
      await call(`${pools}/namespaces/team/sandboxwarmpools/py`, {
        method: "PATCH",
        headers: { "content-type": "application/merge-patch+json" },
        body: JSON.stringify({ spec: { replicas: 9 } }),
      }),
    ).toBe(403);
    expect(await call(`/api/v1/namespaces/${NAMESPACE}/secrets`)).toBe(403);
    expect(await call("/api/v1/namespaces/kube-system/configmaps")).toBe(403);
    expect(await call("/apis/coordination.k8s.io/v1/namespaces/team/leases")).toBe(403);
    expect(await call("/api/v1/pods")).toBe(403);
    // Issue 22 case 4: its own Lease only. resourceNames refuse a read, write, list or delete of any other Lease;
    // the ValidatingAdmissionPolicy refuses a create of any other name, which RBAC cannot narrow.
    const leases = `/apis/coordination.k8s.io/v1/namespaces/${NAMESPACE}/leases`;
    const other = { apiVersion: "coordination.k8s.io/v1", kind: "Lease", metadata: { name: "someone-else", namespace: NAMESPACE }, spec: { holderIdentity: "x" } };
    const refused = await call(leases, { method: "POST", ...json(other) }, true);
    expect(refused.status).toBe(403);
    expect(JSON.stringify(refused.body)).toContain("sandbox-apiserver may create only Lease cocoon-warmpool-driver, not someone-else");
    expect(await call(leases)).toBe(403);
    expect(await call(`${leases}/cocoon-warmpool-driver`, { method: "DELETE" })).toBe(403);
    expect(
      await call(`${leases}/cocoon-warmpool-driver`, { method: "PATCH", headers: { "content-type": "application/merge-patch+json" }, body: JSON.stringify({ spec: { leaseDurationSeconds: 315360000 } }) }),
    ).toBe(403);
    expect(await call("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-scheduler", { method: "PUT", ...json({ ...other, metadata: { name: "kube-scheduler", namespace: "kube-system" } }) })).toBe(403);
  });

  test("sandbox-envd-proxy: reads and watches NodeInventory and the Nodes that vouch for it, and nothing else", async () => {
    const call = await as("sandbox-envd-proxy");
    expect(await call(inventories)).toBe(200);
    expect(await call(`${inventories}?watch=1&timeoutSeconds=1`)).toBe(200);
    expect(await call("/api/v1/nodes")).toBe(200);
    expect(await call("/api/v1/nodes?watch=1&timeoutSeconds=1")).toBe(200);
    expect(await call("/api/v1/nodes/n", { method: "PATCH", headers: { "content-type": "application/merge-patch+json" }, body: "{}" })).toBe(403);
    expect(await call(`${pools}/sandboxwarmpools`)).toBe(403);
    expect(await call(`/api/v1/namespaces/${NAMESPACE}/secrets`)).toBe(403);
    expect(await call(`/apis/coordination.k8s.io/v1/namespaces/${NAMESPACE}/leases`)).toBe(403);
  });

  test("helm upgrade with warmPoolDriver=false takes the pool and leader-election grants away", async () => {
    const caBundle = Buffer.from(cluster.caPem).toString("base64");
    const values = merge(
      E2B,
      at("apiserver.e2b.envdSecret", { value: "envd-key", secretName: "" }),
      at("certManager", { enabled: false, caBundle }),
      at("apiserver.warmPoolDriver", false),
    );
    const r = await helm(["upgrade", "sandbox-operator", chartDir, "--namespace", NAMESPACE, "--kubeconfig", kubeconfig], values);
    expect(r.code).toBe(0);
    const call = await as("sandbox-apiserver");
    expect(await call(inventories)).toBe(200);
    expect(await call(`${pools}/sandboxwarmpools`)).toBe(403);
    expect(await call(`/apis/coordination.k8s.io/v1/namespaces/${NAMESPACE}/leases/cocoon-warmpool-driver`)).toBe(403);
    expect((await cluster.adminFetch(`/apis/rbac.authorization.k8s.io/v1/namespaces/${NAMESPACE}/roles/sandbox-apiserver-leader-election`)).status).toBe(404);
  }, 60_000);

  test("helm uninstall removes the release's objects and leaves the CRD (and so every node's inventory)", async () => {
    const r = await helm(["uninstall", "sandbox-operator", "--namespace", NAMESPACE, "--kubeconfig", kubeconfig]);
    expect(r.code).toBe(0);
    for (const path of [
      `/apis/apps/v1/namespaces/${NAMESPACE}/deployments/sandbox-apiserver`,
      `/apis/apps/v1/namespaces/${NAMESPACE}/deployments/sandbox-envd-proxy`,
      "/apis/rbac.authorization.k8s.io/v1/clusterroles/sandbox-apiserver-inventory-reader",
      "/apis/rbac.authorization.k8s.io/v1/namespaces/kube-system/rolebindings/sandbox-apiserver-auth-reader",
      "/apis/apiregistration.k8s.io/v1/apiservices/v1beta1.agents.x-k8s.io",
    ]) {
      const got = await cluster.adminFetch(path);
      await got.body?.cancel();
      expect(`${path}: ${got.status}`).toBe(`${path}: 404`);
    }
    const crd = await cluster.adminFetch("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/nodeinventories.sandbox.cocoonstack.io");
    await crd.body?.cancel();
    expect(crd.status).toBe(200);
  }, 60_000);
});
