// Issue 22 cases 2 and 4 on the real kube-apiserver, as installed from manifests/: two nodes run vk-sandbox, each as
// its own ServiceAccount sandbox-nodes/<node>. With node vk-a's token, every write that names another node's Node,
// Lease, NodeInventory, Pod or Event is refused by kube-apiserver (RBAC or the node admission policy), as are the
// warm-pool driver's Lease and a kube-system Lease, while both daemons run with no request refused. Second review
// (findings A and B): with the operator's node networks set (ConfigMap sandbox-nodes/vk-sandbox-node-networks), a
// node identity whose Node does not exist yet cannot register it at a host of its own; and no node identity sets the
// operator's node-restriction / node-role labels or registers its Node without the virtual-kubelet taint.
import { beforeAll, describe, expect, test } from "bun:test";
import { waitFor } from "../../support/wait.ts";
import { auditEvents, nodeUser, sandboxPod, runningWithClaim } from "./cluster.ts";
import { useE2eStack } from "./stack.ts";

const env = useE2eStack({ sim: { pools: ["base=10"] } });
const A = "vk-a";
const B = "vk-b";
const inventories = "/apis/sandbox.cocoonstack.io/v1beta1/nodeinventories";
/** Node identities with no daemon and, until a test creates one, no Node: a leaked token before first start. */
const C = "vk-c";
const D = "vk-d";
const NODE_NETWORKS = "127.0.0.0/8";
let tokenA = "";

/** A request as node A's ServiceAccount: the status and the Status message kube-apiserver answered. */
function asA(method: string, path: string, body?: unknown, contentType = "application/json"): Promise<{ status: number; message: string }> {
  return asNode(tokenA, method, path, body, contentType);
}

/** A request as the ServiceAccount whose token is `token`. */
async function asNode(token: string, method: string, path: string, body?: unknown, contentType = "application/json"): Promise<{ status: number; message: string }> {
  const r = await fetch(`${env.e2e.cluster.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { "content-type": contentType }) },
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

/** A Node as a node identity could POST it; by default as vk-sandbox registers one (node-object.ts). */
const nodeObject = (name: string, o: { addresses?: string[]; labels?: Record<string, string>; taints?: object[] } = {}) => ({
  apiVersion: "v1",
  kind: "Node",
  metadata: { name, labels: { type: "virtual-kubelet", "kubernetes.io/role": "agent", ...o.labels } },
  spec: { taints: o.taints ?? [{ key: "virtual-kubelet.io/provider", value: "sandboxd", effect: "NoSchedule" }] },
  status: { addresses: (o.addresses ?? []).map((address) => ({ type: "InternalIP", address })) },
});
const mergePatch = "application/merge-patch+json";

beforeAll(async () => {
  const { stack, e2e } = env;
  // The operator's node networks (manifests/node-networks.example.yaml), before any node registers.
  await e2e.kube.ok("POST", "/api/v1/namespaces/sandbox-nodes/configmaps", {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name: "vk-sandbox-node-networks", namespace: "sandbox-nodes" },
    data: { nodeNetworks: NODE_NETWORKS },
  });
  for (const node of [A, B]) stack.daemon({ node, extra: ["--node-ip=127.0.0.1", "--publish-inventory", "--publish-interval=1s"], statePath: `${stack.dir}/${node}/claims.json` });
  await waitFor("both inventories published", async () => {
    for (const node of [A, B]) if ((await e2e.kube.req("GET", `${inventories}/${node}`)).status !== 200) return false;
    return true;
  }, 60_000);
  tokenA = e2e.nodeToken(A);
  // kube-apiserver loads a ValidatingAdmissionPolicy and its binding through informers: on a busy machine the first
  // write can come before they are in force (and RBAC alone lets a node patch any inventory). Wait until a write the
  // policy must refuse is refused (a dry run: nothing is stored while waiting); without the policy this times out.
  await waitFor("the node-restriction policy refuses another node's inventory", async () => {
    const r = await asA("PATCH", `${inventories}/${B}?fieldManager=attacker&force=true&dryRun=All`, inventory(B, B, "127.0.0.1:9"), "application/apply-patch+yaml");
    return r.status === 403 && r.message.includes(`may write only its own nodeinventories, not ${B}`);
  }, 30_000);
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

describe("issue 29: a node writes and deletes only its own NodeInventoryShards, and reads none", () => {
  const shards = "/apis/sandbox.cocoonstack.io/v1beta1/nodeinventoryshards";
  const shard = (name: string, node: string) => ({ apiVersion: "sandbox.cocoonstack.io/v1beta1", kind: "NodeInventoryShard", metadata: { name }, node, generation: 9, index: 0, count: 1 });
  const refusal = `node identity ${A} may write only its own inventory shards, named ${A}.<generation>.<index>`;

  test("both daemons publish the sharded form with no request refused", async () => {
    for (const node of [A, B]) {
      const inv = await env.e2e.kube.req<{ shards?: { generation: number; count: number } }>("GET", `${inventories}/${node}`);
      expect(inv.body.shards?.count).toBeGreaterThanOrEqual(1);
      const name = `${node}.${inv.body.shards!.generation}.0`;
      expect((await env.e2e.kube.req("GET", `${shards}/${name}`)).status).toBe(200);
    }
  });

  test("another node's shard cannot be rewritten or deleted, nor one squatted under its name or a malformed one", async () => {
    const b = await env.e2e.kube.req<{ shards: { generation: number } }>("GET", `${inventories}/${B}`);
    const bShard = `${B}.${b.body.shards.generation}.0`;
    const rewrite = await apply(`${shards}/${bShard}`, shard(bShard, B));
    expect([rewrite.status, rewrite.message]).toEqual([403, expect.stringContaining(refusal)]);
    expect((await apply(`${shards}/${bShard}`, shard(bShard, A))).status).toBe(403);
    expect((await asA("DELETE", `${shards}/${bShard}`)).status).toBe(403);
    // Names of its own prefix that are not <node>.<generation>.<index>: another node ("vk-a.x") could own them.
    for (const name of [`${B}.9.1`, `${A}.x.0`, `${A}.9`, `${A}.9.0.1`, `${A}-9-0`]) {
      const r = await asA("POST", shards, shard(name, A));
      expect({ name, status: r.status }).toEqual({ name, status: 403 });
    }
    expect((await env.e2e.kube.req("GET", `${shards}/${bShard}`)).status).toBe(200);
  });

  test("its own shard name is its to create and delete; listing or reading shards (every tenant's rows) is not", async () => {
    const own = `${A}.999.0`;
    expect((await asA("POST", shards, shard(own, A))).status).toBe(201);
    expect((await asA("DELETE", `${shards}/${own}`)).status).toBe(200);
    expect((await asA("GET", shards)).status).toBe(403);
    expect((await asA("GET", `${shards}/${A}.1.0`)).status).toBe(403);
  });
});

describe("second review A: with node networks set, a node identity registers its Node only inside them", () => {
  test("a Node of its own name at a host outside the networks is refused, on create and by its first status patch", async () => {
    const tokenC = env.e2e.nodeToken(C);
    // The params ConfigMap reaches the admission plugin through an informer: wait for the refusal (dry run: nothing
    // is stored while waiting). Without the policy the create is allowed and this times out.
    const refused = await waitFor("the node-networks policy refuses an outside address", async () => {
      const r = await asNode(tokenC, "POST", "/api/v1/nodes?dryRun=All", nodeObject(C, { addresses: ["10.66.6.6"] }));
      return r.status === 403 ? r.message : undefined;
    }, 20_000);
    expect(refused).toContain(`node identity ${C} may give its Node only addresses in the node networks [${NODE_NETWORKS}], not 10.66.6.6`);
    expect((await asNode(tokenC, "POST", "/api/v1/nodes?dryRun=All", nodeObject(C, { addresses: ["127.0.0.7", "fd00::1"] }))).message).toContain("not fd00::1");
    // Created without addresses, the first status patch (which the address freeze allows) must stay inside too.
    expect((await asNode(tokenC, "POST", "/api/v1/nodes", nodeObject(C))).status).toBe(201);
    try {
      const moved = await asNode(tokenC, "PATCH", `/api/v1/nodes/${C}/status`, { status: { addresses: [{ type: "InternalIP", address: "10.66.6.6" }] } }, mergePatch);
      expect(moved.status).toBe(403);
      expect(moved.message).toContain("not 10.66.6.6");
      const inside = await asNode(tokenC, "PATCH", `/api/v1/nodes/${C}/status`, { status: { addresses: [{ type: "InternalIP", address: "127.0.0.7" }, { type: "Hostname", address: C }] } }, mergePatch);
      expect(inside.status).toBe(200);
      const live = await env.e2e.kube.ok<{ status: { addresses: { address: string }[] } }>("GET", `/api/v1/nodes/${C}`);
      expect(live.status.addresses.map((a) => a.address)).toEqual(["127.0.0.7", C]);
    } finally {
      await env.e2e.kube.req("DELETE", `/api/v1/nodes/${C}`);
    }
  });
});

describe("second review B: the operator's node labels and the virtual-kubelet taint are not a node identity's", () => {
  test("registering a Node with a node-restriction or node-role label, or without the provider taint, is refused", async () => {
    const tokenD = env.e2e.nodeToken(D);
    const create = (o: Parameters<typeof nodeObject>[1]) => asNode(tokenD, "POST", "/api/v1/nodes?dryRun=All", nodeObject(D, o));
    for (const key of ["node-restriction.kubernetes.io/pool", "gpu.node-restriction.kubernetes.io/model", "node-role.kubernetes.io/worker"]) {
      const r = await create({ labels: { [key]: "x" } });
      expect(r.status).toBe(403);
      expect(r.message).toContain(`node identity ${D} may not set, change or remove the node-restriction.kubernetes.io/ or node-role.kubernetes.io/ labels of its Node`);
    }
    for (const taints of [[], [{ key: "virtual-kubelet.io/provider", value: "sandboxd", effect: "PreferNoSchedule" }]]) {
      const r = await create({ taints });
      expect(r.status).toBe(403);
      expect(r.message).toContain(`node identity ${D} may not register or keep its Node without the virtual-kubelet.io/provider NoSchedule taint`);
    }
    // As the daemon registers it (its own labels, kubernetes.io/role included, and the taint): allowed.
    expect((await create({ labels: { "kubernetes.io/hostname": D } })).status).toBe(201);
    expect((await env.e2e.kube.req("GET", `/api/v1/nodes/${D}`)).status).toBe(404);
  });

  test("through the status patch it cannot add, change or remove such a label; the operator's label stays and its other writes pass", async () => {
    const status = (labels: Record<string, string | null>) => asA("PATCH", `/api/v1/nodes/${A}/status`, { metadata: { labels } }, mergePatch);
    const added = await status({ "node-restriction.kubernetes.io/pool": "dedicated" });
    expect(added.status).toBe(403);
    expect(added.message).toContain("may not set, change or remove");
    expect((await status({ "node-role.kubernetes.io/control-plane": "" })).status).toBe(403);
    // The operator labels A's Node (kubectl label as admin: the policy does not see it).
    expect((await env.e2e.kube.req("PATCH", `/api/v1/nodes/${A}`, { metadata: { labels: { "node-role.kubernetes.io/sandbox": "" } } }, mergePatch)).status).toBe(200);
    expect((await status({ "node-role.kubernetes.io/sandbox": null })).status).toBe(403);
    expect((await status({ "node-role.kubernetes.io/sandbox": "other" })).status).toBe(403);
    expect((await status({ "unreserved.example/x": "y" })).status).toBe(200);
    const live = await env.e2e.kube.ok<{ metadata: { labels: Record<string, string> } }>("GET", `/api/v1/nodes/${A}`);
    expect(live.metadata.labels["node-role.kubernetes.io/sandbox"]).toBe("");
    expect(live.metadata.labels["node-restriction.kubernetes.io/pool"]).toBeUndefined();
  });

  test("a taint the operator removed stays removed without blocking the node's status patches", async () => {
    expect((await env.e2e.kube.req("PATCH", `/api/v1/nodes/${B}`, { spec: { taints: null } }, mergePatch)).status).toBe(200);
    const r = await asNode(env.e2e.nodeToken(B), "PATCH", `/api/v1/nodes/${B}/status`, { metadata: { labels: { heartbeat: "1" } } }, mergePatch);
    expect(r.status).toBe(200);
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
    // Inside the node networks (127.0.0.0/8): only the address-change policy has a say.
    const moved = await asA("PATCH", `/api/v1/nodes/${A}/status`, { status: { addresses: [{ type: "InternalIP", address: "127.66.6.6" }] } }, "application/merge-patch+json");
    expect(moved.status).toBe(403);
    expect(moved.message).toContain("may not change the addresses of its Node");
    // Outside them both policies refuse, and which one the apiserver names first is its choice.
    const away = await asA("PATCH", `/api/v1/nodes/${A}/status`, { status: { addresses: [{ type: "InternalIP", address: "10.66.6.6" }] } }, "application/merge-patch+json");
    expect(away.status).toBe(403);
    expect(away.message).toMatch(/may not change the addresses of its Node|may give its Node only addresses in the node networks/);
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
