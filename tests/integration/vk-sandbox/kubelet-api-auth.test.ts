// Issue 22 case 4 (the kubelet part), against a real kube-apiserver: the kubelet API's routes answer only a caller
// the cluster vouches for (a TokenReview'd bearer token, or a client certificate from the client CA such as the
// apiserver's --kubelet-client-certificate) and authorizes (a SubjectAccessReview on nodes/<sub> named after this
// node), with the reviews made as the daemon's own ServiceAccount under manifests/rbac.yaml. Before the fix, an
// anonymous GET /pods answered 200 with every Pod's env values.
import { expect, test, describe, beforeAll } from "bun:test";
import type { V1Pod } from "@kubernetes/client-node";
import {
  createKubeletApp,
  guardKubeletApi,
  kubeletDelegation,
  NOT_IMPLEMENTED,
  serveKubeletApi,
  type KubeletServer,
} from "#services/vk-sandbox/kubelet-api/index.ts";
import { SubjectAccessReviews } from "#shared/kube/index.ts";
import { createCA, issueCertificate, selfSignedServingCert } from "#shared/tls/index.ts";
import { kubectlBinary } from "../../kube/peers.ts";
import { run } from "../../support/run.ts";
import { waitFor } from "../../support/wait.ts";
import { quietLog, useKubeFixture } from "./kube-fixture.ts";

const NODE = "vk-auth-node";
const NS = "kubelet-auth";
const SECRET_VALUE = "sk-live-do-not-leak-4242";

const k = useKubeFixture();

const pod: V1Pod = {
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "holder", namespace: NS },
  spec: {
    nodeName: NODE,
    containers: [{ name: "main", image: "sandbox", env: [{ name: "API_KEY", value: SECRET_VALUE }] }],
  },
};

let server: KubeletServer;
let base: string;

/**
 * Binds `rules` to a fresh ServiceAccount and returns its token once the apiserver's own RBAC cache allows the first
 * rule: a review our server made before that would be a denial it keeps for 30 s.
 */
async function grant(sa: string, rules: { apiGroups: string[]; resources: string[]; verbs: string[]; resourceNames?: string[] }[]): Promise<string> {
  await k.cluster.apply([
    { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: sa, namespace: NS } },
    { apiVersion: "rbac.authorization.k8s.io/v1", kind: "ClusterRole", metadata: { name: `kubelet-auth-${sa}` }, rules },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRoleBinding",
      metadata: { name: `kubelet-auth-${sa}` },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: `kubelet-auth-${sa}` },
      subjects: [{ kind: "ServiceAccount", name: sa, namespace: NS }],
    },
  ]);
  const [resource, subresource] = rules[0]!.resources[0]!.split("/");
  const probe = {
    user: `system:serviceaccount:${NS}:${sa}`,
    groups: ["system:serviceaccounts", `system:serviceaccounts:${NS}`, "system:authenticated"],
    resourceAttributes: { verb: rules[0]!.verbs[0], resource, subresource, name: rules[0]!.resourceNames?.[0] ?? NODE, version: "v1", group: "" },
  };
  await waitFor(`RBAC for ${sa}`, async () => {
    const r = await k.admin.create<{ status?: { allowed?: boolean } }>(SubjectAccessReviews, { apiVersion: "authorization.k8s.io/v1", kind: "SubjectAccessReview", spec: probe });
    return r.status?.allowed === true;
  });
  return k.cluster.serviceAccountToken(NS, sa);
}

const get = (path: string, init: { token?: string; cert?: { certPem: string; keyPem: string }; method?: string } = {}) =>
  fetch(`${base}${path}`, {
    method: init.method ?? "GET",
    redirect: "manual",
    headers: init.token ? { Authorization: `Bearer ${init.token}` } : {},
    tls: { rejectUnauthorized: false, ...(init.cert ? { cert: init.cert.certPem, key: init.cert.keyPem } : {}) },
  });

beforeAll(async () => {
  await k.cluster.createNamespace(NS);
  const app = createKubeletApp({ listPods: () => [pod], runningPods: () => [pod], metrics: async () => ({ body: "up 1\n", contentType: "text/plain" }) });
  server = await serveKubeletApi({
    // The reviews go out as the daemon: the vk-sandbox ServiceAccount token manifests/rbac.yaml binds.
    handler: guardKubeletApi({ ...kubeletDelegation(k.daemon, NODE), fetch: (req) => app.fetch(req), log: quietLog }),
    tls: await selfSignedServingCert({ cn: "vk-sandbox", ips: ["127.0.0.1"] }),
    clientCaPem: k.cluster.clientCaPem,
    hostname: "127.0.0.1",
    port: 0,
  });
  k.running.push(server);
  base = `https://127.0.0.1:${server.port}`;
}, 60_000);

describe("kubelet API authentication and authorization (issue 22 case 4)", () => {
  test("anonymous: every route is 401 with a plain reason, and no Pod env value is in the body", async () => {
    for (const path of ["/pods", "/runningpods/", "/stats/summary", "/metrics", "/metrics/resource", "/containerLogs/ns/p/c", "/exec/ns/p/c?output=1", "/nope"]) {
      const r = await get(path);
      const body = await r.text();
      expect({ path, status: r.status }).toEqual({ path, status: 401 });
      expect(body).toBe("Unauthorized: present a bearer token or a client certificate\n");
      expect(body).not.toContain(SECRET_VALUE);
    }
  });

  test("a token the cluster does not know is 401", async () => {
    const r = await get("/pods", { token: "not-a-real-token" });
    expect(r.status).toBe(401);
    expect(await r.text()).toBe("Unauthorized: the token was not accepted\n");
  });

  test("a ServiceAccount without nodes/proxy is 403, naming the user, verb and subresource", async () => {
    const token = await k.cluster.serviceAccountToken(NS, "default");
    const r = await get("/pods", { token });
    const body = await r.text();
    expect(r.status).toBe(403);
    expect(body).toBe(`Forbidden (user=system:serviceaccount:${NS}:default, verb=get, resource=nodes, subresource=proxy)\n`);
    expect(body).not.toContain(SECRET_VALUE);
  });

  test("with get nodes/proxy on this node: /pods is 200 and carries the PodList", async () => {
    const token = await grant("proxy-reader", [{ apiGroups: [""], resources: ["nodes/proxy"], verbs: ["get"], resourceNames: [NODE] }]);
    const r = await get("/pods", { token });
    expect(r.status).toBe(200);
    const list = (await r.json()) as { kind: string; items: V1Pod[] };
    expect(list.kind).toBe("PodList");
    expect(list.items.map((p) => p.metadata?.name)).toEqual(["holder"]);
    // The grant is get only: a POST is reviewed as create and refused before the router's 405.
    expect((await get("/pods", { token, method: "POST" })).status).toBe(403);
  });

  test("nodes/proxy on another node's name does not open this one", async () => {
    const token = await grant("other-node", [{ apiGroups: [""], resources: ["nodes/proxy"], verbs: ["get"], resourceNames: ["some-other-node"] }]);
    expect((await get("/pods", { token })).status).toBe(403);
  });

  test("subresources as the kubelet maps them: nodes/stats opens /stats/summary, nodes/metrics /metrics, neither /pods", async () => {
    const token = await grant("stats-metrics", [{ apiGroups: [""], resources: ["nodes/stats", "nodes/metrics"], verbs: ["get"] }]);
    expect((await get("/stats/summary", { token })).status).toBe(200);
    const m = await get("/metrics", { token });
    expect(m.status).toBe(200);
    expect(await m.text()).toBe("up 1\n");
    expect((await get("/metrics/resource", { token })).status).toBe(200);
    const pods = await get("/pods", { token });
    expect(pods.status).toBe(403);
    expect(await pods.text()).toContain("subresource=proxy");
  });

  test("the apiserver's kubelet client certificate (CN kube-apiserver-kubelet-client, client CA) is 200", async () => {
    const r = await get("/pods", { cert: k.cluster.kubeletClient });
    expect(r.status).toBe(200);
    expect(((await r.json()) as { items: V1Pod[] }).items).toHaveLength(1);
  });

  test("a client certificate from another CA is 401, even with a system:masters organization", async () => {
    const ca = await createCA("not-the-client-ca");
    const cert = await issueCertificate({ ca, cn: "kube-apiserver-kubelet-client", organizations: ["system:masters"], usages: "client" });
    const r = await get("/pods", { cert });
    expect(r.status).toBe(401);
    expect(await r.text()).toBe("Unauthorized: the client certificate was not accepted\n");
  });

  test("kubectl logs and exec through kube-apiserver still reach the routes and get their documented answers", async () => {
    // A Node this server answers for (InternalIP 127.0.0.1, our port) and the Pod bound to it.
    await k.cluster.apply([{ apiVersion: "v1", kind: "Node", metadata: { name: NODE } }]);
    const status = await k.cluster.adminFetch(`/api/v1/nodes/${NODE}/status`, {
      method: "PATCH",
      headers: { "content-type": "application/merge-patch+json" },
      body: JSON.stringify({ status: { addresses: [{ type: "InternalIP", address: "127.0.0.1" }], daemonEndpoints: { kubeletEndpoint: { Port: server.port } } } }),
    });
    expect(status.status).toBe(200);
    await k.cluster.apply([pod]);
    const kubectl = await kubectlBinary();
    const kubeconfig = k.cluster.kubeconfig();
    const logs = await run([kubectl, "--kubeconfig", kubeconfig, "-n", NS, "logs", "holder"], { timeoutMs: 30_000 });
    expect(logs.code).not.toBe(0);
    expect(logs.stderr).toContain(NOT_IMPLEMENTED);
    const exec = await run([kubectl, "--kubeconfig", kubeconfig, "-n", NS, "exec", "holder", "--", "echo", "hi"], { timeoutMs: 30_000 });
    expect(exec.code).not.toBe(0);
    expect(exec.stderr).toContain(NOT_IMPLEMENTED);
  }, 60_000);
});
