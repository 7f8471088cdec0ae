// Issue 22 cases 2 and 4 on the real kube-apiserver, as installed from manifests/: two nodes run vk-sandbox, each as
// its own ServiceAccount sandbox-nodes/<node>. With node vk-a's token, every write that names another node's Node,
// Lease, NodeInventory, Pod or Event is refused by kube-apiserver (RBAC or the node admission policy), as are the
// warm-pool driver's Lease and a kube-system Lease, while both daemons run with no request refused.
import { beforeAll, describe, expect, test } from "bun:test";
import { waitFor } from "../../support/wait.ts";
import { auditEvents, nodeUser, sandboxPod, runningWithClaim } from "./cluster.ts";
import { useE2eStack } from "./stack.ts";

const env = useE2eStack({ sim: { pools: ["base=10"] } });
const A = "vk-a";
const B = "vk-b";
const inventories = "/apis/sandbox.cocoonstack.io/v1beta1/nodeinventories";
let tokenA = "";

/** A request as node A's ServiceAccount: the status and the Status message kube-apiserver answered. */
async function asA(method: string, path: string, body?: unknown, contentType = "application/json"): Promise<{ status: number; message: string }> {
  const r = await fetch(`${env.e2e.cluster.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${tokenA}`, ...(body === undefined ? {} : { "content-type": contentType }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    tls: { ca: env.e2e.cluster.caPem },
  });
  const text = await r.text();
  let message = text;
  try {
    message = (JSON.parse(text) as { message?: string }).message ?? text;
  } catch {}
  return { status: r.status, message };
}

const inventory = (name: string, node = name, address = "127.0.0.1:1") => ({
  apiVersion: "sandbox.cocoonstack.io/v1beta1",
  kind: "NodeInventory",
  metadata: { name },
  node,
  address,
});
const apply = (path: string, obj: unknown) => asA("PATCH", `${path}?fieldManager=attacker&force=true`, obj, "application/apply-patch+yaml");
const lease = (name: string, namespace: string, holder = "attacker") => ({
  apiVersion: "coordination.k8s.io/v1",
  kind: "Lease",
  metadata: { name, namespace },
  spec: { holderIdentity: holder, leaseDurationSeconds: 315_360_000 },
});

beforeAll(async () => {
  const { stack, e2e } = env;
  for (const node of [A, B]) stack.daemon({ node, extra: ["--node-ip=127.0.0.1", "--publish-inventory", "--publish-interval=1s"], statePath: `${stack.dir}/${node}/claims.json` });
  await waitFor("both inventories published", async () => {
    for (const node of [A, B]) if ((await e2e.kube.req("GET", `${inventories}/${node}`)).status !== 200) return false;
    return true;
  }, 60_000);
  tokenA = e2e.nodeToken(A);
}, 90_000);

describe("issue 22 case 2: a node writes only its own NodeInventory", () => {
  test("patching another node's inventory, creating a made-up one, or one of its own name that names another node is refused", async () => {
    const other = await apply(`${inventories}/${B}`, inventory(B, B, "127.0.0.1:9"));
    expect(other.status).toBe(403);
    expect(other.message).toContain(`node identity ${A} may write only its own nodeinventories, not ${B}`);
    const fake = await asA("POST", inventories, inventory("vk-fake"));
    expect(fake.status).toBe(403);
    expect(fake.message).toContain("not vk-fake");
    expect((await apply(`${inventories}/vk-fake`, inventory("vk-fake"))).status).toBe(403);
    const disguised = await apply(`${inventories}/${A}`, inventory(A, B));
    expect(disguised.status).toBe(403);
    expect(disguised.message).toContain("may publish only its own inventory");
    // Nothing changed: B's inventory is still B's own, and no made-up object exists.
    const b = await env.e2e.kube.req<{ address: string }>("GET", `${inventories}/${B}`);
    expect(b.body.address).not.toBe("127.0.0.1:9");
    expect((await env.e2e.kube.req("GET", `${inventories}/vk-fake`)).status).toBe(404);
  });

  test("its own inventory is still its to write", async () => {
    const own = await env.e2e.kube.req<object>("GET", `${inventories}/${A}`);
    expect((await apply(`${inventories}/${A}`, { ...inventory(A, A, (own.body as { address: string }).address) })).status).toBe(200);
  });
});

describe("issue 22 case 4: Leases, Nodes, Pods and Events only as far as the node's own", () => {
  test("the warm-pool driver's Lease and a kube-system Lease cannot be read, replaced or created with a node token", async () => {
    await env.e2e.cluster.createNamespace("sandbox-system");
    await env.e2e.kube.ok("POST", "/apis/coordination.k8s.io/v1/namespaces/sandbox-system/leases", lease("cocoon-warmpool-driver", "sandbox-system", "replica-1"));
    const driver = "/apis/coordination.k8s.io/v1/namespaces/sandbox-system/leases/cocoon-warmpool-driver";
    expect((await asA("GET", driver)).status).toBe(403);
    expect((await asA("PUT", driver, lease("cocoon-warmpool-driver", "sandbox-system"))).status).toBe(403);
    expect((await asA("POST", "/apis/coordination.k8s.io/v1/namespaces/sandbox-system/leases", lease("other", "sandbox-system"))).status).toBe(403);
    await env.e2e.kube.ok("POST", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases", lease("kube-scheduler", "kube-system", "scheduler"));
    expect((await asA("PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-scheduler", lease("kube-scheduler", "kube-system"))).status).toBe(403);
    const held = await env.e2e.kube.req<{ spec: { holderIdentity: string } }>("GET", driver);
    expect(held.body.spec.holderIdentity).toBe("replica-1");
  });

  test("another node's Lease in kube-node-lease cannot be replaced or a foreign one created", async () => {
    const path = `/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/${B}`;
    const live = await env.e2e.kube.ok<{ metadata: object }>("GET", path);
    const stolen = await asA("PUT", path, { ...lease(B, "kube-node-lease"), metadata: live.metadata });
    expect(stolen.status).toBe(403);
    expect(stolen.message).toContain(`may write only its own leases, not ${B}`);
    expect((await asA("POST", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", lease("vk-fake", "kube-node-lease"))).status).toBe(403);
  });

  test("another node's Node cannot be created or patched, and its own Node's addresses cannot be changed", async () => {
    expect((await asA("POST", "/api/v1/nodes", { apiVersion: "v1", kind: "Node", metadata: { name: "vk-fake" } })).status).toBe(403);
    const merge = (body: unknown) => ["PATCH", body, "application/merge-patch+json"] as const;
    const [m, b, ct] = merge({ metadata: { labels: { stolen: "yes" } } });
    expect((await asA(m, `/api/v1/nodes/${B}/status`, b, ct)).status).toBe(403);
    const moved = await asA("PATCH", `/api/v1/nodes/${A}/status`, { status: { addresses: [{ type: "InternalIP", address: "10.66.6.6" }] } }, "application/merge-patch+json");
    expect(moved.status).toBe(403);
    expect(moved.message).toContain("may not change the addresses of its Node");
    // Its own Node, addresses untouched, is still its to patch.
    expect((await asA("PATCH", `/api/v1/nodes/${A}/status`, { metadata: { labels: { mine: "yes" } } }, "application/merge-patch+json")).status).toBe(200);
  });

  test("a Pod bound to another node: no status update, no delete, no Event for it; the own node's Pod runs", async () => {
    const pod = await env.e2e.kube.createPod(sandboxPod("on-b", B));
    await runningWithClaim(env.e2e.kube, "ns", "on-b");
    const live = (await env.e2e.kube.pod("ns", "on-b"))!;
    const status = await asA("PUT", "/api/v1/namespaces/ns/pods/on-b/status", { ...live, status: { ...live.status, phase: "Failed" } });
    expect(status.status).toBe(403);
    expect(status.message).toContain("may act only on Pods bound to it");
    expect((await asA("DELETE", "/api/v1/namespaces/ns/pods/on-b", { gracePeriodSeconds: 0 })).status).toBe(403);
    const event = await asA("POST", "/api/v1/namespaces/ns/events", {
      apiVersion: "v1",
      kind: "Event",
      metadata: { name: "forged.1", namespace: "ns" },
      involvedObject: { kind: "Pod", name: "on-b", namespace: "ns", uid: pod.metadata!.uid },
      reason: "Forged",
      message: "x",
      type: "Warning",
      source: { component: `${B}/pod-controller`, host: B },
    });
    expect(event.status).toBe(403);
    expect((await env.e2e.kube.pod("ns", "on-b"))?.status?.phase).toBe("Running");
    await env.e2e.kube.createPod(sandboxPod("on-a", A));
    await runningWithClaim(env.e2e.kube, "ns", "on-a");
    await env.e2e.kube.deletePod("ns", "on-a");
    await waitFor("on-a deleted by its node", async () => !(await env.e2e.kube.pod("ns", "on-a")), 30_000);
  }, 60_000);

  test("the daemons themselves, under the same RBAC and policy, had no request refused", async () => {
    const daemons = auditEvents(env.e2e.auditPath).filter((e) => (e.userAgent ?? "").startsWith("vk-sandbox"));
    expect(new Set(daemons.map((e) => e.user.username))).toEqual(new Set([nodeUser(A), nodeUser(B)]));
    expect(daemons.filter((e) => [401, 403, 422].includes(e.responseStatus?.code ?? 0)).map((e) => `${e.user.username} ${e.verb} ${e.requestURI}`)).toEqual([]);
  });
});
