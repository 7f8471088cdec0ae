// What `helm template` puts in a cluster, configuration by configuration (chart/README.md "Objects"): the exact
// kinds, names and namespaces, the counts (seed 003's and the objects beyond it: objects.ts), and the fields an
// operator relies on.
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
import { LEASE_NAME } from "#services/sandbox-apiserver/warmpool/leader.ts";
import {
  E2B,
  NAMESPACE,
  at,
  container,
  deployment,
  find,
  helm,
  identity,
  merge,
  render,
  template,
  chartDir,
  type KubeObject,
  type Probe,
} from "./helm.ts";
import { BEYOND_SEED, SEED_003_DEFAULT, SEED_003_E2B, beyondIdentity } from "./objects.ts";

const NS = NAMESPACE;

/** The default render: seed 003's 16 (chart.md §3.1, the CRD first) and the objects beyond it (objects.ts). */
const DEFAULT_OBJECTS = [...SEED_003_DEFAULT, ...BEYOND_SEED.filter((o) => o.in === "default").map(beyondIdentity)];

/** What e2b adds: seed 003's 6 (chart.md §3.2) and the proxy's metrics Service beyond them (objects.ts). */
const E2B_OBJECTS = [...SEED_003_E2B, ...BEYOND_SEED.filter((o) => o.in === "e2b").map(beyondIdentity)];

const CERT_MANAGER = DEFAULT_OBJECTS.filter((o) => /^(Issuer|Certificate) /.test(o));
const LEADER_ELECTION = DEFAULT_OBJECTS.filter((o) => o.includes("leader-election") || o.includes("warmpool-annotations") || o.includes("template-built-images"));

const ids = (objects: KubeObject[]) => objects.map(identity).sort();
const sorted = (list: string[]) => [...list].sort();
const without = (list: string[], drop: string[]) => list.filter((o) => !drop.includes(o));

/** chart.md §3.7/§3.9: liveness 10 s / 20 s, readiness 5 s / 10 s. */
function probes(live: string, ready: string, port: string, scheme: string): Record<"livenessProbe" | "readinessProbe", Probe | undefined> {
  return {
    livenessProbe: { httpGet: { path: live, port, scheme }, initialDelaySeconds: 10, periodSeconds: 20 },
    readinessProbe: { httpGet: { path: ready, port, scheme }, initialDelaySeconds: 5, periodSeconds: 10 },
  };
}

/**
 * One replica per hostname at most ahead of the others, selected by the name label only, over the Nodes the Pod
 * tolerates (vk-sandbox's tainted virtual nodes are not hostnames a replica could go to).
 */
const spread = (name: string) => [
  {
    maxSkew: 1,
    topologyKey: "kubernetes.io/hostname",
    whenUnsatisfiable: "DoNotSchedule",
    nodeTaintsPolicy: "Honor",
    labelSelector: { matchLabels: { "app.kubernetes.io/name": name } },
  },
];

const DEFAULT_RESOURCES = { requests: { cpu: "100m", memory: "128Mi" }, limits: { memory: "512Mi" } };

describe("object sets", () => {
  test("default render: exactly 23 objects (seed 003's 16, the shard CRD and the 6 admission-policy objects beyond it), in the release namespace except the auth reader", async () => {
    const objects = await render();
    expect(objects).toHaveLength(23);
    expect(ids(objects)).toEqual(sorted(DEFAULT_OBJECTS));
  });

  test("without --include-crds: the same minus the two CRDs (21)", async () => {
    const objects = await render({}, { includeCrds: false });
    expect(objects).toHaveLength(21);
    expect(ids(objects)).toEqual(sorted(DEFAULT_OBJECTS.filter((o) => !o.startsWith("CustomResourceDefinition "))));
  });

  test("object names never depend on the release name", async () => {
    const a = await render({}, { release: "r" });
    const b = await render({}, { release: "another-release-name" });
    expect(ids(b)).toEqual(ids(a));
    expect(find(b, "Deployment", "sandbox-apiserver").metadata.labels!["app.kubernetes.io/instance"]).toBe(
      "another-release-name",
    );
  });

  test("every namespaced object follows --namespace, except the auth reader in kube-system", async () => {
    const objects = await render(E2B, { namespace: "elsewhere" });
    for (const o of objects) {
      if (o.metadata.namespace === undefined) continue;
      const expected = o.metadata.name === "sandbox-apiserver-auth-reader" ? "kube-system" : "elsewhere";
      expect(`${identity(o)}`).toBe(`${o.kind} ${expected}/${o.metadata.name}`);
    }
    const reader = find(objects, "RoleBinding", "sandbox-apiserver-auth-reader");
    expect(reader.metadata.namespace).toBe("kube-system");
    expect(reader.roleRef).toEqual({
      apiGroup: "rbac.authorization.k8s.io",
      kind: "Role",
      name: "extension-apiserver-authentication-reader",
    });
    expect(reader.subjects).toEqual([{ kind: "ServiceAccount", name: "sandbox-apiserver", namespace: "elsewhere" }]);
  });

  test("warmPoolDriver=false: 15 objects, no leader election, a ClusterRole of the inventory, Node and Pod reads", async () => {
    const objects = await render(at("apiserver.warmPoolDriver", false));
    expect(ids(objects)).toEqual(sorted(without(DEFAULT_OBJECTS, LEADER_ELECTION)));
    expect(find(objects, "ClusterRole", "sandbox-apiserver-inventory-reader").rules).toEqual([
      { apiGroups: ["sandbox.cocoonstack.io"], resources: ["nodeinventories", "nodeinventoryshards"], verbs: ["get", "list", "watch"] },
      { apiGroups: [""], resources: ["nodes"], verbs: ["list", "watch"] },
      { apiGroups: [""], resources: ["pods"], verbs: ["get"] },
      // Sandbox lifecycle Events in the sandboxes' namespaces (issue 21), with or without the driver.
      { apiGroups: [""], resources: ["events"], verbs: ["create", "patch"] },
    ]);
    expect(container(objects, "sandbox-apiserver").args).toContain("--enable-warm-pool-driver=false");
  });

  test("certManager.enabled=false with caBundle: 17 objects, caBundle set, no injection annotation", async () => {
    const objects = await render(at("certManager", { enabled: false, caBundle: "Zm9v" }));
    expect(ids(objects)).toEqual(sorted(without(DEFAULT_OBJECTS, CERT_MANAGER)));
    const apiService = find(objects, "APIService", "v1beta1.agents.x-k8s.io");
    expect((apiService.spec as { caBundle?: string }).caBundle).toBe("Zm9v");
    expect(apiService.metadata.annotations?.["cert-manager.io/inject-ca-from"]).toBeUndefined();
    expect(objects.some((o) => o.apiVersion.startsWith("cert-manager.io/"))).toBe(false);
  });

  test("both off: 11 objects", async () => {
    const objects = await render(
      merge(at("certManager", { enabled: false, caBundle: "Zm9v" }), at("apiserver.warmPoolDriver", false)),
    );
    expect(ids(objects)).toEqual(sorted(without(DEFAULT_OBJECTS, [...CERT_MANAGER, ...LEADER_ELECTION])));
    expect(objects).toHaveLength(11);
  });

  test("e2b enabled: 30 objects (seed 003's 22, the shard CRD, the 6 admission-policy objects and the proxy's metrics Service beyond it)", async () => {
    const objects = await render(E2B);
    expect(objects).toHaveLength(30);
    expect(ids(objects)).toEqual(sorted([...DEFAULT_OBJECTS, ...E2B_OBJECTS]));
  });

  test("e2b with envdSecret.value: 31 (seed 003's 23 and the 8 beyond it), the Secret rendered and mounted by both Deployments", async () => {
    const objects = await render(merge(E2B, at("apiserver.e2b.envdSecret", { value: "s3cret", secretName: "" })));
    expect(objects).toHaveLength(31);
    expect(ids(objects)).toEqual(sorted([...DEFAULT_OBJECTS, ...E2B_OBJECTS, `Secret ${NS}/sandbox-e2b-envd-secret`]));
    const secret = find(objects, "Secret", "sandbox-e2b-envd-secret");
    expect(secret.type).toBe("Opaque");
    expect(secret.stringData).toEqual({ secret: "s3cret" });
    expect(secret.metadata.labels).toEqual({
      "helm.sh/chart": "sandbox-operator-0.1.0",
      "app.kubernetes.io/instance": "r",
      "app.kubernetes.io/managed-by": "Helm",
    });
    for (const name of ["sandbox-apiserver", "sandbox-envd-proxy"]) {
      const volumes = deployment(objects, name).template.spec.volumes!;
      expect(volumes.find((v) => v.name === "e2b-envd-secret")?.secret?.secretName).toBe("sandbox-e2b-envd-secret");
    }
  });

  test("envdSecret.value wins over secretName", async () => {
    const objects = await render(merge(E2B, at("apiserver.e2b.envdSecret.value", "v")));
    expect(objects).toHaveLength(31);
    const volumes = deployment(objects, "sandbox-apiserver").template.spec.volumes!;
    expect(volumes.find((v) => v.name === "e2b-envd-secret")?.secret?.secretName).toBe("sandbox-e2b-envd-secret");
  });

  test("templateAliases adds one ConfigMap (key aliases), its mount and --e2b-template-alias-file", async () => {
    const aliases = "base python:3.12 small\nnode node:22\n";
    const objects = await render(merge(E2B, at("apiserver.e2b.templateAliases", aliases)));
    expect(objects).toHaveLength(31);
    const cm = find(objects, "ConfigMap", "sandbox-apiserver-e2b-template-aliases");
    expect(cm.metadata.namespace).toBe(NS);
    expect(cm.data).toEqual({ aliases });
    const c = container(objects, "sandbox-apiserver");
    expect(c.args).toContain("--e2b-template-alias-file=/etc/sandbox-apiserver/e2b-template-aliases/aliases");
    expect(c.volumeMounts).toContainEqual({
      name: "e2b-template-aliases",
      mountPath: "/etc/sandbox-apiserver/e2b-template-aliases",
      readOnly: true,
    });
    const volumes = deployment(objects, "sandbox-apiserver").template.spec.volumes!;
    expect(volumes.find((v) => v.name === "e2b-template-aliases")?.configMap?.name).toBe(
      "sandbox-apiserver-e2b-template-aliases",
    );
  });

  test("templateAliases without e2b renders nothing extra", async () => {
    const objects = await render(at("apiserver.e2b.templateAliases", "base img"));
    expect(objects).toHaveLength(23);
  });
});

describe("APIService and cert-manager chain", () => {
  test("APIService fields and CA injection by default, no caBundle", async () => {
    const objects = await render();
    const s = find(objects, "APIService", "v1beta1.agents.x-k8s.io");
    expect(s.apiVersion).toBe("apiregistration.k8s.io/v1");
    expect(s.metadata.annotations).toEqual({ "cert-manager.io/inject-ca-from": `${NS}/sandbox-apiserver-serving` });
    expect(s.spec).toEqual({
      group: "agents.x-k8s.io",
      version: "v1beta1",
      service: { name: "sandbox-apiserver", namespace: NS, port: 443 },
      groupPriorityMinimum: 1000,
      versionPriority: 15,
    });
  });

  test("issuers and certificates chain up, DNS names use the release namespace", async () => {
    const objects = await render({}, { namespace: "ops" });
    expect(find(objects, "Issuer", "sandbox-apiserver-selfsigned").spec).toEqual({ selfSigned: {} });
    expect(find(objects, "Certificate", "sandbox-apiserver-ca").spec).toEqual({
      isCA: true,
      commonName: "sandbox-apiserver-ca",
      secretName: "sandbox-apiserver-ca",
      duration: "87600h",
      privateKey: { algorithm: "ECDSA", size: 256 },
      issuerRef: { kind: "Issuer", name: "sandbox-apiserver-selfsigned" },
    });
    expect(find(objects, "Issuer", "sandbox-apiserver-ca").spec).toEqual({ ca: { secretName: "sandbox-apiserver-ca" } });
    expect(find(objects, "Certificate", "sandbox-apiserver-serving").spec).toEqual({
      dnsNames: ["sandbox-apiserver.ops.svc", "sandbox-apiserver.ops.svc.cluster.local"],
      secretName: "sandbox-apiserver-serving-certs",
      duration: "8760h",
      renewBefore: "720h",
      issuerRef: { kind: "Issuer", name: "sandbox-apiserver-ca" },
    });
    for (const o of objects.filter((x) => x.apiVersion.startsWith("cert-manager.io/"))) {
      expect(o.apiVersion).toBe("cert-manager.io/v1");
      expect(o.metadata.namespace).toBe("ops");
    }
  });

  test("servingCertSecret names the Certificate's Secret and the apiserver's volume", async () => {
    const objects = await render(at("certManager.servingCertSecret", "my-serving"));
    expect((find(objects, "Certificate", "sandbox-apiserver-serving").spec as { secretName: string }).secretName).toBe(
      "my-serving",
    );
    const volumes = deployment(objects, "sandbox-apiserver").template.spec.volumes!;
    expect(volumes.find((v) => v.name === "serving-certs")?.secret?.secretName).toBe("my-serving");
  });
});

describe("RBAC", () => {
  test("the inventory reader grants nodeinventories, list/watch of the Nodes that vouch for them and, with the driver, the pool rules", async () => {
    const objects = await render();
    expect(find(objects, "ClusterRole", "sandbox-apiserver-inventory-reader").rules).toEqual([
      { apiGroups: ["sandbox.cocoonstack.io"], resources: ["nodeinventories", "nodeinventoryshards"], verbs: ["get", "list", "watch"] },
      { apiGroups: [""], resources: ["nodes"], verbs: ["list", "watch"] },
      { apiGroups: [""], resources: ["pods"], verbs: ["get"] },
      { apiGroups: [""], resources: ["events"], verbs: ["create", "patch"] },
      {
        apiGroups: ["extensions.agents.x-k8s.io"],
        resources: ["sandboxwarmpools", "sandboxtemplates"],
        verbs: ["get", "list", "watch"],
      },
      { apiGroups: ["extensions.agents.x-k8s.io"], resources: ["sandboxwarmpools/status"], verbs: ["get", "update", "patch"] },
      { apiGroups: ["extensions.agents.x-k8s.io"], resources: ["sandboxwarmpools"], verbs: ["patch"] },
    ]);
    // Issue 22 case 4: GET and PUT of its own Lease only; create cannot carry resourceNames, the policy narrows it.
    expect(find(objects, "Role", "sandbox-apiserver-leader-election").rules).toEqual([
      { apiGroups: ["coordination.k8s.io"], resources: ["leases"], resourceNames: [LEASE_NAME], verbs: ["get", "update"] },
      { apiGroups: ["coordination.k8s.io"], resources: ["leases"], verbs: ["create"] },
      { apiGroups: [""], resources: ["events"], verbs: ["create", "patch"] },
    ]);
    const policy = find(objects, "ValidatingAdmissionPolicy", "sandbox-apiserver-leader-election").spec as {
      matchConditions: { expression: string }[];
      validations: { expression: string }[];
    };
    expect(policy.matchConditions[0]!.expression).toBe(`request.userInfo.username == "system:serviceaccount:${NS}:sandbox-apiserver"`);
    expect(policy.validations[0]!.expression).toBe(`object.metadata.name == "${LEASE_NAME}"`);
  });

  test("the built-template policy and its binding are manifests/template-admission.yaml's, labels aside", async () => {
    const objects = await render();
    const manifests = parseAllDocuments(readFileSync(join(chartDir, "..", "manifests", "template-admission.yaml"), "utf8")).map((d) => d.toJSON() as KubeObject);
    for (const kind of ["ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"]) {
      const rendered = find(objects, kind, "sandbox-template-built-images");
      const manifest = manifests.find((o) => o.kind === kind)!;
      expect({ ...rendered, metadata: { name: rendered.metadata.name } }).toEqual({ ...manifest, metadata: { name: manifest.metadata.name } });
    }
  });

  test("every binding's subject is the apiserver's ServiceAccount in the release namespace", async () => {
    const objects = await render();
    const bindings = objects.filter((o) => o.kind === "ClusterRoleBinding" || o.kind === "RoleBinding");
    expect(bindings).toHaveLength(4);
    for (const b of bindings) {
      expect(b.subjects).toEqual([{ kind: "ServiceAccount", name: "sandbox-apiserver", namespace: NS }]);
    }
    expect(find(objects, "ClusterRoleBinding", "sandbox-apiserver:system:auth-delegator").roleRef).toEqual({
      apiGroup: "rbac.authorization.k8s.io",
      kind: "ClusterRole",
      name: "system:auth-delegator",
    });
  });

  test("the proxy reads nodeinventories and the Nodes (list/watch) and nothing else, as its own ServiceAccount", async () => {
    const objects = await render(E2B);
    expect(find(objects, "ClusterRole", "sandbox-envd-proxy-inventory-reader").rules).toEqual([
      { apiGroups: ["sandbox.cocoonstack.io"], resources: ["nodeinventories", "nodeinventoryshards"], verbs: ["get", "list", "watch"] },
      { apiGroups: [""], resources: ["nodes"], verbs: ["list", "watch"] },
    ]);
    expect(find(objects, "ClusterRoleBinding", "sandbox-envd-proxy-inventory-reader").subjects).toEqual([
      { kind: "ServiceAccount", name: "sandbox-envd-proxy", namespace: NS },
    ]);
    expect(deployment(objects, "sandbox-envd-proxy").template.spec.serviceAccountName).toBe("sandbox-envd-proxy");
  });
});

describe("apiserver Deployment", () => {
  test("inventory.trustedNetworks: --inventory-trusted-networks on both inventory readers, joined by commas; absent by default", async () => {
    const objects = await render(merge(E2B, at("inventory.trustedNetworks", ["10.0.0.0/8", "fd00::/8"])));
    for (const name of ["sandbox-apiserver", "sandbox-envd-proxy"]) {
      expect(container(objects, name).args).toContain("--inventory-trusted-networks=10.0.0.0/8,fd00::/8");
    }
    for (const name of ["sandbox-apiserver", "sandbox-envd-proxy"]) {
      expect((container(await render(E2B), name).args ?? []).some((a) => a.startsWith("--inventory-trusted-networks"))).toBe(false);
    }
  });

  test("default args are exactly the first four, no token volume", async () => {
    const objects = await render();
    const c = container(objects, "sandbox-apiserver");
    expect(c.args).toEqual([
      "--secure-port=6443",
      "--tls-cert-file=/etc/sandbox-apiserver/serving-certs/tls.crt",
      "--tls-private-key-file=/etc/sandbox-apiserver/serving-certs/tls.key",
      "--enable-warm-pool-driver=true",
    ]);
    expect(c.args!.some((a) => a.startsWith("--inventory-stale-after"))).toBe(false);
    const volumes = deployment(objects, "sandbox-apiserver").template.spec.volumes!;
    expect(volumes.map((v) => v.name).sort()).toEqual(["serving-certs", "tmp"]);
  });

  test("sandboxdToken.secretName mounts that Secret for --sandboxd-token-file", async () => {
    const objects = await render(at("apiserver.sandboxdToken.secretName", "t"));
    const c = container(objects, "sandbox-apiserver");
    expect(c.args).toContain("--sandboxd-token-file=/etc/sandbox-apiserver/sandboxd-token/token");
    expect(c.volumeMounts).toContainEqual({ name: "sandboxd-token", mountPath: "/etc/sandbox-apiserver/sandboxd-token", readOnly: true });
    const volumes = deployment(objects, "sandbox-apiserver").template.spec.volumes!;
    expect(volumes.find((v) => v.name === "sandboxd-token")?.secret?.secretName).toBe("t");
  });

  test("securePort drives the flag, the https containerPort and nothing else", async () => {
    const objects = await render(at("apiserver.securePort", 7443));
    const c = container(objects, "sandbox-apiserver");
    expect(c.args![0]).toBe("--secure-port=7443");
    expect(c.ports).toEqual([{ name: "https", containerPort: 7443, protocol: "TCP" }]);
    expect((find(objects, "Service", "sandbox-apiserver").spec as { ports: unknown }).ports).toEqual([
      { name: "https", port: 443, targetPort: "https", protocol: "TCP" },
    ]);
  });

  test("replicas, image, probes, resources, spread and PDB", async () => {
    const objects = await render();
    const d = deployment(objects, "sandbox-apiserver");
    expect(d.replicas).toBe(2);
    expect(d.template.spec.serviceAccountName).toBe("sandbox-apiserver");
    const c = container(objects, "sandbox-apiserver");
    expect(c.name).toBe("sandbox-apiserver");
    expect(c.image).toBe("ghcr.io/cocoonstack/sandbox-apiserver:latest");
    expect({ livenessProbe: c.livenessProbe, readinessProbe: c.readinessProbe }).toEqual(probes("/livez", "/readyz", "https", "HTTPS"));
    expect(c.resources).toEqual(DEFAULT_RESOURCES);
    expect(d.template.spec.topologySpreadConstraints).toEqual(spread("sandbox-apiserver"));
    const pdb = find(objects, "PodDisruptionBudget", "sandbox-apiserver");
    expect(pdb.apiVersion).toBe("policy/v1");
    expect(pdb.spec).toEqual({ minAvailable: 1, selector: { matchLabels: { "app.kubernetes.io/name": "sandbox-apiserver" } } });
  });

  test("e2b args in the spec's order; optional ones only when set", async () => {
    const plain = container(await render(E2B), "sandbox-apiserver");
    expect(plain.args).toEqual([
      "--secure-port=6443",
      "--tls-cert-file=/etc/sandbox-apiserver/serving-certs/tls.crt",
      "--tls-private-key-file=/etc/sandbox-apiserver/serving-certs/tls.key",
      "--enable-warm-pool-driver=true",
      "--sandboxd-token-file=/etc/sandbox-apiserver/sandboxd-token/token",
      "--enable-e2b-api",
      "--e2b-bind-address=:8080",
      "--e2b-namespace=default",
      "--e2b-domain=sandbox.example.com",
      "--e2b-api-key-file=/etc/sandbox-apiserver/e2b-api-keys/keys",
      "--e2b-envd-secret-file=/etc/sandbox-apiserver/e2b-envd-secret/secret",
      // The chart's per-namespace quotas for a shared fleet (docs/decisions.md "Quotas for a shared fleet").
      "--e2b-default-max-sandboxes=20",
      "--e2b-default-creates-per-second=2",
      "--e2b-default-max-snapshots=10",
      "--e2b-default-snapshots-per-second=0.2",
      "--public-traffic-default=true",
    ]);
    expect(plain.ports).toEqual([
      { name: "https", containerPort: 6443, protocol: "TCP" },
      { name: "e2b", containerPort: 8080, protocol: "TCP" },
    ]);
    const all = container(
      await render(
        merge(E2B, at("apiserver.e2b", { envdVersion: "0.9.1", defaultTimeoutSeconds: 600, builds: { enabled: true } })),
      ),
      "sandbox-apiserver",
    );
    expect(all.args!.slice(11)).toEqual([
      "--e2b-envd-version=0.9.1",
      "--e2b-default-timeout=600",
      "--e2b-default-max-sandboxes=20",
      "--e2b-default-creates-per-second=2",
      "--e2b-default-max-snapshots=10",
      "--e2b-default-snapshots-per-second=0.2",
      "--public-traffic-default=true",
      "--e2b-builds",
      "--e2b-build-parallel=2",
      // With builds on, the timeout and log-line bound are always passed (their values: builds.test.ts).
      "--e2b-build-timeout=30m",
      "--e2b-build-log-lines=10000",
    ]);
  });

  test("e2b mounts: api keys, envd secret and token, each read-only from its Secret", async () => {
    const objects = await render(merge(E2B, at("apiserver.e2b.apiKeySecret.key", "k.txt")));
    const c = container(objects, "sandbox-apiserver");
    expect(c.args).toContain("--e2b-api-key-file=/etc/sandbox-apiserver/e2b-api-keys/k.txt");
    expect(c.volumeMounts!.filter((m) => m.name !== "tmp")).toEqual([
      { name: "serving-certs", mountPath: "/etc/sandbox-apiserver/serving-certs", readOnly: true },
      { name: "sandboxd-token", mountPath: "/etc/sandbox-apiserver/sandboxd-token", readOnly: true },
      { name: "e2b-api-keys", mountPath: "/etc/sandbox-apiserver/e2b-api-keys", readOnly: true },
      { name: "e2b-envd-secret", mountPath: "/etc/sandbox-apiserver/e2b-envd-secret", readOnly: true },
    ]);
    const volumes = deployment(objects, "sandbox-apiserver").template.spec.volumes!;
    expect(volumes.find((v) => v.name === "e2b-api-keys")?.secret?.secretName).toBe("e2b-api-keys");
    expect(volumes.find((v) => v.name === "e2b-envd-secret")?.secret?.secretName).toBe("e2b-envd-secret");
  });
});

describe("e2b Services", () => {
  test("sandbox-apiserver-e2b: port e2b 80, affinity only with builds, never on the aggregated API's Service", async () => {
    const plain = await render(E2B);
    const spec = find(plain, "Service", "sandbox-apiserver-e2b").spec as Record<string, unknown>;
    expect(spec.ports).toEqual([{ name: "e2b", port: 80, targetPort: "e2b", protocol: "TCP" }]);
    expect(spec.sessionAffinity).toBeUndefined();
    expect(spec.selector).toEqual({ "app.kubernetes.io/name": "sandbox-apiserver" });

    const builds = await render(merge(E2B, at("apiserver.e2b.builds.enabled", true)));
    expect((find(builds, "Service", "sandbox-apiserver-e2b").spec as Record<string, unknown>).sessionAffinity).toBe("ClientIP");
    expect((find(builds, "Service", "sandbox-apiserver").spec as Record<string, unknown>).sessionAffinity).toBeUndefined();
    expect((find(builds, "Service", "sandbox-envd-proxy").spec as Record<string, unknown>).sessionAffinity).toBeUndefined();
  });
});

describe("envd proxy Deployment", () => {
  test("default e2b: h2c on :8443, --namespace= present and empty, --domain falls back to the e2b domain", async () => {
    const objects = await render(E2B);
    const d = deployment(objects, "sandbox-envd-proxy");
    expect(d.replicas).toBe(2);
    const c = container(objects, "sandbox-envd-proxy");
    expect(c.image).toBe("ghcr.io/cocoonstack/sandbox-envd-proxy:latest");
    expect(c.args).toEqual([
      "--bind-address=:8443",
      "--namespace=",
      "--domain=sandbox.example.com",
      "--e2b-envd-secret-file=/etc/sandbox-envd-proxy/e2b-envd-secret/secret",
      "--sandboxd-token-file=/etc/sandbox-envd-proxy/sandboxd-token/token",
      "--max-relays=128",
      "--max-relays-per-sandbox=64",
      "--max-relays-per-client=0",
      "--max-relays-per-namespace=32",
      "--max-public-relays=64",
      "--max-public-relays-per-sandbox=16",
      "--max-public-relays-per-client=0",
      "--relay-buffer-max=33554432",
      "--guest-handshake-timeout=30s",
      "--wake-timeout=30s",
      "--request-body-min-rate=1024",
      "--request-body-rate-window=10s",
      "--public-traffic-default=true",
      `--e2b-api-upstream=http://sandbox-apiserver-e2b.${NS}.svc:80`,
      "--metrics-bind-address=:9090",
    ]);
    expect(c.ports).toEqual([
      { name: "proxy", containerPort: 8443, protocol: "TCP" },
      { name: "metrics", containerPort: 9090, protocol: "TCP" },
    ]);
    expect({ livenessProbe: c.livenessProbe, readinessProbe: c.readinessProbe }).toEqual(probes("/healthz", "/healthz", "proxy", "HTTP"));
    expect(c.resources).toEqual(DEFAULT_RESOURCES);
    expect(d.template.spec.topologySpreadConstraints).toEqual(spread("sandbox-envd-proxy"));
    // The data plane only; the metrics port is on sandbox-envd-proxy-metrics (finding C).
    expect((find(objects, "Service", "sandbox-envd-proxy").spec as { ports: unknown }).ports).toEqual([
      { name: "http", port: 80, targetPort: "proxy", protocol: "TCP" },
    ]);
    const metrics = find(objects, "Service", "sandbox-envd-proxy-metrics");
    expect(metrics.spec).toEqual({
      type: "ClusterIP",
      selector: { "app.kubernetes.io/name": "sandbox-envd-proxy" },
      ports: [{ name: "metrics", port: 9090, targetPort: "metrics", protocol: "TCP" }],
    });
    const volumes = d.template.spec.volumes!;
    expect(volumes.find((v) => v.name === "sandboxd-token")?.secret?.secretName).toBe("sandboxd-token");
    expect(volumes.find((v) => v.name === "e2b-envd-secret")?.secret?.secretName).toBe("e2b-envd-secret");
  });

  test("envdProxy.relay sets the relay's bounds", async () => {
    const objects = await render(
      merge(
        E2B,
        at("envdProxy.relay", {
          maxRelays: 512,
          maxRelaysPerSandbox: 100,
          maxRelaysPerClient: 20,
          maxRelaysPerNamespace: 50,
          maxPublicRelays: 64,
          maxPublicRelaysPerSandbox: 24,
          maxPublicRelaysPerClient: 4,
          bufferMax: 268435456,
          guestHandshakeTimeout: "1m",
          wakeTimeout: "2m",
          requestBodyMinRate: 0,
          requestBodyRateWindow: "30s",
        }),
      ),
    );
    const args = container(objects, "sandbox-envd-proxy").args!;
    expect(args.filter((a) => /^--(max-relays|max-public-relays|relay-buffer-max|guest-handshake-timeout|wake-timeout|request-body)/.test(a))).toEqual([
      "--max-relays=512",
      "--max-relays-per-sandbox=100",
      "--max-relays-per-client=20",
      "--max-relays-per-namespace=50",
      "--max-public-relays=64",
      "--max-public-relays-per-sandbox=24",
      "--max-public-relays-per-client=4",
      "--relay-buffer-max=268435456",
      "--guest-handshake-timeout=1m",
      "--wake-timeout=2m",
      "--request-body-min-rate=0",
      "--request-body-rate-window=30s",
    ]);
  });

  test("envdProxy.publicTraffic and serveApiHost: public ports off, api.{domain} not served", async () => {
    const objects = await render(merge(E2B, at("envdProxy", { publicTraffic: { default: false, forbid: true }, serveApiHost: false })));
    const args = container(objects, "sandbox-envd-proxy").args!;
    expect(args.filter((a) => /^--(public-traffic-default|forbid-public-traffic|e2b-api-upstream)/.test(a))).toEqual(["--public-traffic-default=false", "--forbid-public-traffic"]);
  });

  test("envdProxy.publicTraffic is the one value behind both binaries' public-ports flags, so they cannot disagree", async () => {
    const pick = (args: string[]) => args.filter((a) => /^--(public-traffic-default|forbid-public-traffic)/.test(a));
    for (const [publicTraffic, want] of [
      [{ default: true, forbid: false }, ["--public-traffic-default=true"]],
      [{ default: false, forbid: false }, ["--public-traffic-default=false"]],
      [{ default: false, forbid: true }, ["--public-traffic-default=false", "--forbid-public-traffic"]],
    ] as const) {
      const objects = await render(merge(E2B, at("envdProxy.publicTraffic", publicTraffic)));
      expect(pick(container(objects, "sandbox-apiserver").args!)).toEqual([...want]);
      expect(pick(container(objects, "sandbox-envd-proxy").args!)).toEqual([...want]);
    }
    // Without the e2b surface the apiserver stamps nothing and gets neither flag.
    const off = container(await render(merge(E2B, at("apiserver.e2b.enabled", false))), "sandbox-apiserver");
    expect(pick(off.args!)).toEqual([]);
  });

  test("envdProxy.domain and namespace win", async () => {
    const objects = await render(merge(E2B, at("envdProxy", { domain: "relay.example.com", namespace: "team-a", port: 9443 })));
    const c = container(objects, "sandbox-envd-proxy");
    expect(c.args!.slice(0, 3)).toEqual(["--bind-address=:9443", "--namespace=team-a", "--domain=relay.example.com"]);
    expect(c.ports![0]).toEqual({ name: "proxy", containerPort: 9443, protocol: "TCP" });
  });

  test("metricsPort: its own listener flag, container port and Service; 0 renders none; the public port is refused", async () => {
    const movedObjects = await render(merge(E2B, at("envdProxy.metricsPort", 9464)));
    const moved = container(movedObjects, "sandbox-envd-proxy");
    expect(moved.args).toContain("--metrics-bind-address=:9464");
    expect(moved.ports).toContainEqual({ name: "metrics", containerPort: 9464, protocol: "TCP" });
    expect((find(movedObjects, "Service", "sandbox-envd-proxy-metrics").spec as { ports: unknown }).ports).toEqual([
      { name: "metrics", port: 9464, targetPort: "metrics", protocol: "TCP" },
    ]);
    const off = await render(merge(E2B, at("envdProxy.metricsPort", 0)));
    const c = container(off, "sandbox-envd-proxy");
    expect(c.args!.some((a) => a.startsWith("--metrics-bind-address"))).toBe(false);
    expect(c.ports).toEqual([{ name: "proxy", containerPort: 8443, protocol: "TCP" }]);
    expect((find(off, "Service", "sandbox-envd-proxy").spec as { ports: { name: string }[] }).ports.map((p) => p.name)).toEqual(["http"]);
    expect(off.some((o) => o.metadata.name === "sandbox-envd-proxy-metrics")).toBe(false);
    const same = await template(merge(E2B, at("envdProxy.metricsPort", 8443)));
    expect(same.code).not.toBe(0);
    expect(same.stderr).toContain("envdProxy.metricsPort must differ from envdProxy.port");
  });

  test("tlsSecretName: Service 443/https, HTTPS probes, both TLS args, volume from that Secret", async () => {
    const objects = await render(merge(E2B, at("envdProxy.tlsSecretName", "w")));
    const c = container(objects, "sandbox-envd-proxy");
    expect(c.args!.slice(-3, -1)).toEqual([
      "--tls-cert-file=/etc/sandbox-envd-proxy/serving-certs/tls.crt",
      "--tls-private-key-file=/etc/sandbox-envd-proxy/serving-certs/tls.key",
    ]);
    expect({ livenessProbe: c.livenessProbe, readinessProbe: c.readinessProbe }).toEqual(probes("/healthz", "/healthz", "proxy", "HTTPS"));
    expect((find(objects, "Service", "sandbox-envd-proxy").spec as { ports: unknown }).ports).toEqual([
      { name: "https", port: 443, targetPort: "proxy", protocol: "TCP" },
    ]);
    const volumes = deployment(objects, "sandbox-envd-proxy").template.spec.volumes!;
    expect(volumes.find((v) => v.name === "serving-certs")?.secret?.secretName).toBe("w");
  });
});

describe("pod placement, pulling and annotations", () => {
  const placement = {
    nodeSelector: { "node-role.kubernetes.io/control-plane": "" },
    tolerations: [{ key: "node-role.kubernetes.io/control-plane", operator: "Exists", effect: "NoSchedule" }],
    affinity: { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchExpressions: [{ key: "kubernetes.io/arch", operator: "In", values: ["amd64", "arm64"] }] }] } } },
    priorityClassName: "system-cluster-critical",
    podAnnotations: { "example.com/team": "platform" },
  };

  test("none of it is rendered by default", async () => {
    for (const name of ["sandbox-apiserver", "sandbox-envd-proxy"]) {
      const d = deployment(await render(E2B), name);
      for (const field of ["nodeSelector", "tolerations", "affinity", "priorityClassName", "imagePullSecrets"]) {
        expect(`${name} ${field}: ${JSON.stringify((d.template.spec as unknown as Record<string, unknown>)[field])}`).toBe(`${name} ${field}: undefined`);
      }
      expect(d.template.metadata.annotations).toBeUndefined();
    }
  });

  test("each Deployment takes its own values as given, and both the shared imagePullSecrets", async () => {
    const objects = await render(
      merge(E2B, at("apiserver", placement), at("envdProxy.priorityClassName", "proxy-high"), at("imagePullSecrets", [{ name: "regcred" }]), at("apiserver.e2b.envdSecret.value", "v")),
    );
    const api = deployment(objects, "sandbox-apiserver");
    expect(api.template.spec).toMatchObject({
      nodeSelector: placement.nodeSelector,
      tolerations: placement.tolerations,
      affinity: placement.affinity,
      priorityClassName: "system-cluster-critical",
      imagePullSecrets: [{ name: "regcred" }],
    });
    // Operator annotations sit beside the checksum that rolls pods on a changed secret.
    expect(Object.keys(api.template.metadata.annotations!).sort()).toEqual(["checksum/e2b-envd-secret", "example.com/team"]);
    expect(api.template.spec.topologySpreadConstraints).toEqual(spread("sandbox-apiserver"));
    const proxy = deployment(objects, "sandbox-envd-proxy");
    expect(proxy.template.spec).toMatchObject({ priorityClassName: "proxy-high", imagePullSecrets: [{ name: "regcred" }] });
    expect((proxy.template.spec as unknown as Record<string, unknown>).nodeSelector).toBeUndefined();
  });

  test("a changed envd secret value changes the checksum, so the pods roll", async () => {
    const a = deployment(await render(merge(E2B, at("apiserver.e2b.envdSecret.value", "one"))), "sandbox-envd-proxy");
    const b = deployment(await render(merge(E2B, at("apiserver.e2b.envdSecret.value", "two"))), "sandbox-envd-proxy");
    expect(a.template.metadata.annotations!["checksum/e2b-envd-secret"]).not.toBe(b.template.metadata.annotations!["checksum/e2b-envd-secret"]);
  });
});

describe("labels and selectors", () => {
  test("every templated object carries the common labels, components theirs; selectors only the name", async () => {
    const objects = await render(merge(E2B, at("apiserver.e2b.envdSecret.value", "v"), at("apiserver.e2b.templateAliases", "a b")), {
      release: "rel",
      includeCrds: false,
    });
    const common = {
      "helm.sh/chart": "sandbox-operator-0.1.0",
      "app.kubernetes.io/instance": "rel",
      "app.kubernetes.io/managed-by": "Helm",
    };
    for (const o of objects) {
      const labels = o.metadata.labels ?? {};
      expect(labels).toMatchObject(common);
      const name = labels["app.kubernetes.io/name"];
      if (o.kind === "Secret") expect(labels).toEqual(common);
      else if (o.metadata.name === "sandbox-envd-proxy-metrics") {
        expect(labels).toEqual({ ...common, "app.kubernetes.io/name": "sandbox-envd-proxy", "app.kubernetes.io/component": "metrics" });
      } else if (o.metadata.name.startsWith("sandbox-envd-proxy")) {
        expect(labels).toEqual({ ...common, "app.kubernetes.io/name": "sandbox-envd-proxy", "app.kubernetes.io/component": "data-plane-proxy" });
      } else {
        expect(`${identity(o)} ${name}`).toBe(`${identity(o)} sandbox-apiserver`);
        expect(labels["app.kubernetes.io/component"]).toBe("aggregated-apiserver");
      }
    }
    for (const name of ["sandbox-apiserver", "sandbox-envd-proxy"]) {
      const d = deployment(objects, name);
      expect(d.selector).toEqual({ matchLabels: { "app.kubernetes.io/name": name } });
      expect(d.template.metadata.labels["app.kubernetes.io/name"]).toBe(name);
    }
    for (const s of objects.filter((o) => o.kind === "Service")) {
      const name = s.metadata.name.startsWith("sandbox-envd-proxy") ? "sandbox-envd-proxy" : "sandbox-apiserver";
      expect((s.spec as { selector: unknown }).selector).toEqual({ "app.kubernetes.io/name": name });
    }
  });

  test("default images end in :latest; a pinned tag is used as given", async () => {
    const objects = await render(merge(E2B, at("apiserver.image.tag", "v0.1.0"), at("envdProxy.image", { repository: "reg.local/p", tag: "1.2.3" })));
    expect(container(objects, "sandbox-apiserver").image).toBe("ghcr.io/cocoonstack/sandbox-apiserver:v0.1.0");
    expect(container(objects, "sandbox-envd-proxy").image).toBe("reg.local/p:1.2.3");
  });
});

describe("helm itself", () => {
  test("helm lint --strict passes for the default and the full e2b configuration", async () => {
    const plain = await helm(["lint", "--strict", chartDir]);
    expect(plain.stdout).toContain("1 chart(s) linted, 0 chart(s) failed");
    expect(plain.code).toBe(0);
    const e2b = await helm(
      ["lint", "--strict", chartDir],
      merge(E2B, at("apiserver.e2b.envdSecret.value", "v"), at("envdProxy.tlsSecretName", "w"), at("monitoring.serviceMonitor.enabled", true), at("monitoring.prometheusRule.enabled", true)),
    );
    expect(e2b.stdout).toContain("0 chart(s) failed");
    expect(e2b.code).toBe(0);
  });
});
