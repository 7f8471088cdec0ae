// Delegated authentication and authorization on the real kube-apiserver: through the aggregator with kubectl, and
// directly on the secure port (the only way to see this server's own TokenReview and SubjectAccessReview at work,
// since kube-apiserver authorizes a proxied request before it forwards it). Scenario numbers lead the names.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { createCA, createIntermediateCA, issueCertificate } from "#shared/tls/index.ts";
import { kubectl } from "../../kube/kubectl.ts";
import { type ApiserverProcess, type Stack, rfc3339, startStack } from "./fixture.ts";
import { waitFor } from "#tests/support/wait.ts";

let stack: Stack;
let server: ApiserverProcess;
let userKubeconfig: string;

beforeAll(async () => {
  stack = await startStack();
  server = await stack.startServer({ args: ["--enable-warm-pool-driver=false", "--sandboxd-token=t"] });
  await stack.register(server.port);
  await stack.cluster.createNamespace("a");
  await stack.cluster.createNamespace("b");
  await stack.publishSeen({
    node: "n1",
    publishedAt: rfc3339(Date.now()),
    entries: [
      { name: "a/x", id: "sb_ax", phase: "Running" },
      { name: "b/y", id: "sb_by", phase: "Running" },
    ],
  });
  userKubeconfig = stack.cluster.kubeconfig({ auth: "user-token" });
}, 90_000);

afterAll(async () => {
  await server?.stop();
  await stack?.stop();
});

/** The reasons the server logged for refusing client certificates. */
const refusals = (p: ApiserverProcess): string[] =>
  p
    .stderr()
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l) as { msg?: string; reason?: string })
    .filter((l) => l.msg === "client certificate refused")
    .map((l) => l.reason ?? "");

const direct = (path: string, init: RequestInit & { cert?: { certPem: string; keyPem: string } } = {}) =>
  fetch(`https://127.0.0.1:${server.port}${path}`, {
    ...init,
    tls: { ca: stack.caPem, ...(init.cert ? { cert: init.cert.certPem, key: init.cert.keyPem } : {}) },
  });

describe("authorization through the aggregator", () => {
  test("30: a user with only get in namespace a is refused list in a and get in b, and gets in a", async () => {
    await stack.cluster.apply(`
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: sandbox-getter, namespace: a}
rules: [{apiGroups: [agents.x-k8s.io], resources: [sandboxes], verbs: [get]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: sandbox-getter, namespace: a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: sandbox-getter}
subjects: [{kind: User, name: ${stack.cluster.user.name}}]
`);
    const ok = await waitFor("the Role to apply", async () => {
      const r = await kubectl(["get", "sandbox", "x", "-n", "a", "-o", "name"], { kubeconfig: userKubeconfig });
      return r.code === 0 ? r : undefined;
    }, 10_000);
    expect(ok.stdout.trim()).toBe("sandbox.agents.x-k8s.io/x");
    const list = await kubectl(["get", "sandboxes", "-n", "a"], { kubeconfig: userKubeconfig });
    expect(list.code).not.toBe(0);
    expect(list.stderr).toContain("Forbidden");
    expect(list.stderr).toContain('cannot list resource "sandboxes" in API group "agents.x-k8s.io" in the namespace "a"');
    const other = await kubectl(["get", "sandbox", "y", "-n", "b"], { kubeconfig: userKubeconfig });
    expect(other.stderr).toContain('cannot get resource "sandboxes" in API group "agents.x-k8s.io" in the namespace "b"');
  });
});

describe("this server's own authentication and authorization (direct connections)", () => {
  test("31: a valid token without RBAC is a 403 from this server's SubjectAccessReview; an invalid token is a 401", async () => {
    const token = stack.cluster.user.token;
    const r = await direct("/apis/agents.x-k8s.io/v1beta1/namespaces/b/sandboxes/y", { headers: { authorization: `Bearer ${token}` } });
    expect(r.status).toBe(403);
    const body = (await r.json()) as { reason: string; message: string; details: { name: string } };
    expect(body.reason).toBe("Forbidden");
    expect(body.message).toBe(`sandboxes.agents.x-k8s.io "y" is forbidden: User "${stack.cluster.user.name}" cannot get resource "sandboxes" in API group "agents.x-k8s.io" in the namespace "b"`);
    const bad = await direct("/apis/agents.x-k8s.io/v1beta1/namespaces/b/sandboxes/y", { headers: { authorization: "Bearer not-a-token" } });
    expect(bad.status).toBe(401);
    expect(((await bad.json()) as { reason: string }).reason).toBe("Unauthorized");
    // The Role of scenario 30 lets the same token through for get in a, straight to this server.
    const allowed = await direct("/apis/agents.x-k8s.io/v1beta1/namespaces/a/sandboxes/x", { headers: { authorization: `Bearer ${token}` } });
    expect(allowed.status).toBe(200);
  });

  test("a forged X-Remote-User on a direct connection (no front-proxy certificate) is not believed", async () => {
    const r = await direct("/apis/agents.x-k8s.io/v1beta1/namespaces/b/sandboxes/y", {
      headers: { "X-Remote-User": "admin", "X-Remote-Group": "system:masters" },
    });
    expect(r.status).toBe(403);
    expect(((await r.json()) as { message: string }).message).toContain('User "system:anonymous"');
  });

  test("identity headers from a certificate the front-proxy CA did not sign are not believed either", async () => {
    const rogue = await createCA("rogue-front-proxy-ca");
    const cert = await issueCertificate({ ca: rogue, cn: stack.cluster.frontProxy.clientName, usages: "client" });
    const r = await direct("/apis/agents.x-k8s.io/v1beta1/namespaces/b/sandboxes/y", { cert, headers: { "X-Remote-User": "admin", "X-Remote-Group": "system:masters" } });
    // A certificate neither CA verifies is a failed credential: 401, as kube-apiserver answers, with the reason logged.
    expect(r.status).toBe(401);
    expect(refusals(server).join("\n")).toContain(`client certificate "CN=${stack.cluster.frontProxy.clientName}": not verified by the front-proxy CA`);
  });

  test("32: create on sandboxes without create on sandboxes/fork is refused the fork", async () => {
    await stack.cluster.apply(`
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: sandbox-creator, namespace: b}
rules: [{apiGroups: [agents.x-k8s.io], resources: [sandboxes], verbs: [create, get]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: sandbox-creator, namespace: b}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: sandbox-creator}
subjects: [{kind: User, name: ${stack.cluster.user.name}}]
`);
    await waitFor("the RoleBinding in b to apply", async () => (await kubectl(["get", "sandbox", "y", "-n", "b"], { kubeconfig: userKubeconfig })).code === 0, 10_000);
    const r = await kubectl(["create", "--raw", "/apis/agents.x-k8s.io/v1beta1/namespaces/b/sandboxes/y/fork", "-f", "-"], { kubeconfig: userKubeconfig, stdin: '{"count":1}' });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain("Forbidden");
    // This server's SAR refuses it too, with the subresource in the message.
    const d = await direct("/apis/agents.x-k8s.io/v1beta1/namespaces/b/sandboxes/y/fork", {
      method: "POST",
      body: '{"count":1}',
      headers: { authorization: `Bearer ${stack.cluster.user.token}`, "content-type": "application/json" },
    });
    expect(d.status).toBe(403);
    expect(((await d.json()) as { message: string }).message).toContain('cannot create resource "sandboxes/fork"');
  });

  test("45: anonymous /livez and /readyz are 200; anonymous /metrics is 403; an authorized caller gets Prometheus text", async () => {
    expect((await direct("/livez")).status).toBe(200);
    const ready = await direct("/readyz?verbose");
    expect(ready.status).toBe(200);
    expect(await ready.text()).toContain("[+]shutdown ok");
    expect((await direct("/metrics")).status).toBe(403);
    // A scraper: a ServiceAccount token whose ClusterRole grants the non-resource URL (this server's SAR asks).
    await stack.cluster.apply(`
apiVersion: v1
kind: ServiceAccount
metadata: {name: scraper, namespace: default}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: metrics-reader}
rules: [{nonResourceURLs: [/metrics, /debug/pprof/, /debug/pprof/*], verbs: [get]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: metrics-reader}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: metrics-reader}
subjects: [{kind: ServiceAccount, name: scraper, namespace: default}]
`);
    const token = await stack.cluster.serviceAccountToken("default", "scraper");
    const text = await waitFor("metrics with the scraper's token", async () => {
      const r = await direct("/metrics", { headers: { authorization: `Bearer ${token}` } });
      return r.status === 200 ? r.text() : undefined;
    }, 15_000);
    expect(text).toContain("# TYPE apiserver_request_total counter");
    expect(text).toMatch(/apiserver_request_total\{[^}]*verb="GET"[^}]*resource="sandboxes"[^}]*code="200"/);
    expect(text).toContain('sandbox_inventory_nodes{state="fresh"} 1');
    expect(text).toContain("process_cpu_seconds_total");
  });

  test("--profiling (default on) serves /debug/pprof behind the SAR; --profiling=false serves none", async () => {
    const token = await stack.cluster.serviceAccountToken("default", "scraper");
    expect((await direct("/debug/pprof/")).status).toBe(403);
    const index = await direct("/debug/pprof/", { headers: { authorization: `Bearer ${token}` } });
    expect(index.status).toBe(200);
    expect(await index.text()).toContain("heapstats");
    const stats = await direct("/debug/pprof/heapstats", { headers: { authorization: `Bearer ${token}` } });
    expect(((await stats.json()) as { heapSize: number }).heapSize).toBeGreaterThan(0);
    const off = await stack.startServer({ args: ["--enable-warm-pool-driver=false", "--profiling=false"] });
    try {
      const r = await fetch(`https://127.0.0.1:${off.port}/debug/pprof/`, { tls: { ca: stack.caPem }, headers: { authorization: `Bearer ${token}` } });
      expect(r.status).toBe(404);
    } finally {
      await off.stop();
    }
  }, 30_000);

  test("a change to extension-apiserver-authentication is applied without a restart", async () => {
    const path = "/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication";
    const viaAggregator = async () => (await stack.cluster.adminFetch("/apis/agents.x-k8s.io/v1beta1/namespaces/b/sandboxes/y")).status;
    expect(await viaAggregator()).toBe(200);
    const cm = (await (await stack.cluster.adminFetch(path)).json()) as { data: Record<string, string> };
    const patch = (names: string[]) =>
      stack.cluster.adminFetch(path, {
        method: "PATCH",
        headers: { "content-type": "application/merge-patch+json" },
        body: JSON.stringify({ data: { "requestheader-allowed-names": JSON.stringify(names) } }),
      });
    // The front proxy's CN is no longer allowed: its certificate is a failed credential (401, as kube-apiserver).
    await (await patch(["someone-else"])).body?.cancel();
    try {
      await waitFor("the reload to refuse the front proxy", async () => (await viaAggregator()) === 401, 10_000);
    } finally {
      await (await patch(JSON.parse(cm.data["requestheader-allowed-names"]!) as string[])).body?.cancel();
    }
    await waitFor("the restored names to apply", async () => (await viaAggregator()) === 200, 10_000);
  }, 30_000);

  test("a client certificate from the cluster's client CA (client-ca-file from the ConfigMap) authenticates as its CN and O", async () => {
    // The cluster admin's certificate: CN test-admin, O system:masters, issued by the client CA kube-apiserver
    // publishes in extension-apiserver-authentication; system:masters needs no SAR.
    const r = await direct("/apis/agents.x-k8s.io/v1beta1/namespaces/b/sandboxes/y", { cert: stack.cluster.admin });
    expect(r.status).toBe(200);
    // A certificate from another authority with the same subject is nobody.
    const rogue = await createCA("rogue-client-ca");
    const cert = await issueCertificate({ ca: rogue, cn: "test-admin", organizations: ["system:masters"], usages: "client" });
    expect((await direct("/apis/agents.x-k8s.io/v1beta1/namespaces/b/sandboxes/y", { cert })).status).toBe(401);
  });

  test("kubectl presenting leaf + intermediate is verified up to --client-ca-file; expired, server-only and unrelated chains are 401", async () => {
    const root = await createCA("it-client-root");
    const inter = await createIntermediateCA({ parent: root, cn: "it-client-intermediate" });
    const caFile = join(stack.dir, "chain-client-ca.crt");
    writeFileSync(caFile, root.certPem);
    const chained = await stack.startServer({ args: ["--enable-warm-pool-driver=false", "--sandboxd-token=t", `--client-ca-file=${caFile}`] });
    try {
      /** kubectl straight to the secure port, its client certificate data being leaf + intermediate. */
      const asChain = async (leaf: { certPem: string; keyPem: string }, name: string) => {
        const kubeconfig = join(stack.dir, `${name}.kubeconfig`);
        const b64 = (s: string) => Buffer.from(s).toString("base64");
        writeFileSync(
          kubeconfig,
          JSON.stringify({
            apiVersion: "v1",
            kind: "Config",
            clusters: [{ name: "direct", cluster: { server: `https://127.0.0.1:${chained.port}`, "certificate-authority-data": b64(stack.caPem) } }],
            users: [{ name, user: { "client-certificate-data": b64(leaf.certPem + inter.certPem), "client-key-data": b64(leaf.keyPem) } }],
            contexts: [{ name: "direct", context: { cluster: "direct", user: name } }],
            "current-context": "direct",
          }),
        );
        return kubectl(["get", "--raw", "/apis/agents.x-k8s.io/v1beta1/namespaces/b/sandboxes/y"], { kubeconfig });
      };
      const ok = await asChain(await issueCertificate({ ca: inter, cn: "chain-admin", organizations: ["system:masters"], usages: "client" }), "ok");
      expect(ok.stderr).toBe("");
      expect((JSON.parse(ok.stdout) as { metadata: { name: string } }).metadata.name).toBe("y");

      const hour = 3_600_000;
      const expiredLeaf = await issueCertificate({
        ca: inter,
        cn: "expired-admin",
        organizations: ["system:masters"],
        usages: "client",
        validity: { notBefore: new Date(Date.now() - 3 * hour), notAfter: new Date(Date.now() - hour) },
      });
      const serverOnly = await issueCertificate({ ca: inter, cn: "server-only", organizations: ["system:masters"], usages: "server" });
      const impostorRoot = await createCA("it-client-root");
      const impostor = await issueCertificate({ ca: await createIntermediateCA({ parent: impostorRoot, cn: "it-client-intermediate" }), cn: "impostor", organizations: ["system:masters"], usages: "client" });
      for (const [leaf, name, why] of [
        [expiredLeaf, "expired", '"CN=expired-admin, O=system:masters" expired at'],
        [serverOnly, "server-only", '"CN=server-only, O=system:masters" is not valid for client authentication'],
        [impostor, "impostor", "signed by unknown authority"],
      ] as const) {
        const r = await asChain(leaf, name);
        expect(r.code).not.toBe(0);
        expect(r.stderr).toContain("Unauthorized");
        expect(refusals(chained).join("\n")).toContain(why);
      }
    } finally {
      await chained.stop();
    }
  }, 60_000);
});

describe("spec.operatingMode through the aggregator", () => {
  test("issue 28.3: spec.operatingMode needs what the pause and resume subresources need, besides patch", async () => {
    // Its own namespace and sandbox, so the Roles below change nothing the other tests rely on.
    await stack.cluster.createNamespace("mode");
    await stack.publishSeen({
      node: "n1",
      publishedAt: rfc3339(Date.now()),
      entries: [
        { name: "a/x", id: "sb_ax", phase: "Running" },
        { name: "b/y", id: "sb_by", phase: "Running" },
        { name: "mode/z", id: "sb_mz", phase: "Running" },
      ],
    });
    await stack.cluster.apply(`
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: sandbox-patcher, namespace: mode}
rules: [{apiGroups: [agents.x-k8s.io], resources: [sandboxes], verbs: [get, patch]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: sandbox-patcher, namespace: mode}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: sandbox-patcher}
subjects: [{kind: User, name: ${stack.cluster.user.name}}]
`);
    const suspend = () => kubectl(["patch", "sandbox", "z", "-n", "mode", "--type=merge", "-p", '{"spec":{"operatingMode":"Suspended"}}'], { kubeconfig: userKubeconfig });
    const denied = await waitFor("the patch Role to apply", async () => {
      const r = await suspend();
      return r.stderr.includes("forbidden: spec.operatingMode") ? r : undefined;
    }, 10_000);
    expect(denied.code).not.toBe(0);
    expect(denied.stderr).toContain(`spec.operatingMode Suspended needs create on sandboxes/pause in namespace "mode", as the pause subresource does; User "${stack.cluster.user.name}" may not`);
    await stack.cluster.apply(`
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: sandbox-pauser, namespace: mode}
rules: [{apiGroups: [agents.x-k8s.io], resources: [sandboxes/pause], verbs: [create]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: sandbox-pauser, namespace: mode}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: sandbox-pauser}
subjects: [{kind: User, name: ${stack.cluster.user.name}}]
`);
    // Allowed now: the request passes authorization and goes on to the node (this stack's node has no sandboxd
    // address, so it ends there, with that error and not a 403).
    const allowed = await waitFor("the pause Role to apply", async () => {
      const r = await suspend();
      return r.stderr.includes("forbidden") ? undefined : r;
    }, 10_000);
    expect(allowed.stderr).toContain("advertises no sandboxd address");
  });
});
