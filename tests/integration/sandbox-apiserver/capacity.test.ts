// The capacity answer through the real kube-apiserver (issue 21.2): a fleet with a stale node, an empty node and a
// node whose pool ran dry. The 503 names the pool key, the nodes considered and stale, the warm/target counts seen,
// and carries Retry-After (header and Status details) — which client-go honours, so kubectl create itself waits out
// a dry spell. The stale node's sandboxes and each node's publish lag are on /metrics.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startSandboxdSim, type SandboxdSim } from "#services/sandboxd-sim/sim.ts";
import { kubectl } from "../../kube/kubectl.ts";
import { type ApiserverProcess, type Stack, rfc3339, startStack } from "./fixture.ts";
import { waitFor } from "#tests/support/wait.ts";

const ROOT = "fleet-root-token";
const IMG = "ghcr.io/capacity:1";
let stack: Stack;
let server: ApiserverProcess;
let n1: SandboxdSim;

beforeAll(async () => {
  stack = await startStack();
  n1 = await startSandboxdSim({ rootToken: ROOT, pools: [`${IMG}/none/small=1`] });
  server = await stack.startServer({ args: [`--sandboxd-token=${ROOT}`, "--enable-warm-pool-driver=false"] });
  await stack.register(server.port);
}, 120_000);

afterAll(async () => {
  await server?.stop();
  await n1?.stop();
  await stack?.stop();
});

const body = (name: string, image = IMG) =>
  JSON.stringify({ apiVersion: "agents.x-k8s.io/v1beta1", kind: "Sandbox", metadata: { name }, spec: { podTemplate: { spec: { containers: [{ name: "main", image }] } } } });
const post = (name: string, image = IMG) =>
  stack.cluster.adminFetch("/apis/agents.x-k8s.io/v1beta1/namespaces/default/sandboxes", { method: "POST", headers: { "content-type": "application/json" }, body: body(name, image) });

/** n1: its pool of IMG reported dry (warm 0 of target 2); n2: fresh, no pool; n3: an hour stale, warm, two sandboxes. */
async function dryFleet(): Promise<void> {
  const now = Date.now();
  await stack.publish({
    node: "n3",
    address: "127.0.0.1:9",
    publishedAt: rfc3339(now - 3_600_000),
    pools: [{ template: IMG, warm: 5, target: 5 }],
    entries: [
      { name: "team/a", id: "sb_stale_a", phase: "Running" },
      { name: "team/b", id: "sb_stale_b", phase: "Running" },
    ],
  });
  await stack.publishSeen({ node: "n2", address: "127.0.0.1:9", publishedAt: rfc3339(now), pools: [] });
  await stack.publishSeen({ node: "n1", address: n1.addr, publishedAt: rfc3339(now), pools: [{ template: IMG, warm: 0, target: 2 }] });
}

describe("the capacity answer through the aggregator", () => {
  test("a dry pool: 503 naming the key, 3 nodes considered, 1 stale, the warm/target per fresh node, and Retry-After", async () => {
    await dryFleet();
    const r = await post("dry");
    expect(r.status).toBe(503);
    // No refill measured yet in this process: the default.
    expect(r.headers.get("retry-after")).toBe("5");
    const status = (await r.json()) as { message: string; reason: string; details: { retryAfterSeconds?: number; name?: string } };
    expect(status.reason).toBe("ServiceUnavailable");
    expect(status.details).toMatchObject({ name: "dry", retryAfterSeconds: 5 });
    // The fence entry makes publish-fence a namespace, not a node: three nodes, n1 and n2 fresh (name order).
    expect(status.message).toBe(
      `no warm sandbox available for pool (template="${IMG}" net="none" size="small"): 3 node(s) considered, 1 stale (left out), ` +
        "warm/target per fresh node [0/2, -]; no refill time measured yet; retry after 5s",
    );
  });

  test("an image no fresh node pools: 503 that says so, with no Retry-After (nothing will refill); kubectl shows the text at once", async () => {
    await dryFleet();
    const r = await post("unpooled", "nothing:pooled");
    expect(r.status).toBe(503);
    expect(r.headers.get("retry-after")).toBeNull();
    const k = await kubectl(["create", "-f", "-"], { kubeconfig: stack.admin, stdin: body("unpooled", "nothing:pooled") });
    expect(k.code).not.toBe(0);
    expect(k.stderr).toContain('no warm sandbox available for pool (template="nothing:pooled" net="none" size="small"): 3 node(s) considered, 1 stale (left out)');
    expect(k.stderr).toContain("no fresh node holds a warm target for this pool");
  });

  test("kubectl create waits out a dry spell: client-go retries after Retry-After and the claim lands once the pool refilled", async () => {
    await dryFleet();
    const refusals = async () => Number(/sandbox_claims_total\{surface="aggregated",outcome="error"\} (\d+)/.exec(await metricsText())?.[1] ?? 0);
    const before = await refusals();
    const started = Date.now();
    const create = kubectl(["create", "-f", "-", "-o", "json"], { kubeconfig: stack.admin, stdin: body("patient") });
    // The first attempt saw the dry pool (its 503 is counted); then the node reports its warm VM again.
    await waitFor("the first refused attempt", async () => (await refusals()) > before, 20_000, 100);
    await stack.publishSeen({ node: "n1", address: n1.addr, publishedAt: rfc3339(Date.now()), pools: [{ template: IMG, warm: 1, target: 2 }] });
    const r = await create;
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout).status.nodeName).toBe("n1");
    expect(Date.now() - started).toBeGreaterThanOrEqual(4_000); // it waited about Retry-After before the retry
  }, 60_000);

  test("/metrics: the stale node's sandboxes are counted as hidden; publish lag is recorded per node", async () => {
    await dryFleet();
    const text = await metricsText();
    expect(text).toContain("sandbox_inventory_stale_hidden_sandboxes 2");
    expect(text).toMatch(/sandbox_inventory_publish_lag_seconds_count\{node="n1"\} [1-9]/);
    // The hour-old publish of n3 was seen about an hour late.
    const n3Sum = Number(/sandbox_inventory_publish_lag_seconds_sum\{node="n3"\} ([\d.e+]+)/.exec(text)?.[1]);
    expect(n3Sum).toBeGreaterThanOrEqual(3_600);
  });
});

let scraperToken: string | undefined;
async function metricsText(): Promise<string> {
  if (!scraperToken) {
    await stack.cluster.apply(`
apiVersion: v1
kind: ServiceAccount
metadata: {name: capacity-scraper, namespace: default}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: capacity-metrics-reader}
rules: [{nonResourceURLs: [/metrics], verbs: [get]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: capacity-metrics-reader}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: capacity-metrics-reader}
subjects: [{kind: ServiceAccount, name: capacity-scraper, namespace: default}]
`);
    scraperToken = await stack.cluster.serviceAccountToken("default", "capacity-scraper");
  }
  const token = scraperToken;
  return waitFor("metrics", async () => {
    const r = await fetch(`https://127.0.0.1:${server.port}/metrics`, { headers: { authorization: `Bearer ${token}` }, tls: { ca: stack.caPem } });
    return r.status === 200 ? r.text() : undefined;
  }, 15_000);
}
