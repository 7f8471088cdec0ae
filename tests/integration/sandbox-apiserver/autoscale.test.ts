// Pools that size themselves on the real kube-apiserver under the chart's RBAC and admission policies (issue 21.1):
// an autoscaled SandboxWarmPool starts at its minimum, creates through the aggregated API raise it at once to its
// maximum, the decision shows in the pool's autoscale-status annotation and on /metrics, and turning autoscaling off
// hands the pool back to spec.replicas. The annotation is the only thing of a pool the apiserver's ServiceAccount
// may change (ValidatingAdmissionPolicy sandbox-apiserver-warmpool-annotations).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startSandboxdSim, type SandboxdSim } from "#services/sandboxd-sim/sim.ts";
import { kubectl } from "../../kube/kubectl.ts";
import { type ApiserverProcess, type Stack, rfc3339, startStack } from "./fixture.ts";
import { waitFor } from "#tests/support/wait.ts";

const ROOT = "root";
const IMG = "img:autoscale";
const CONVERGE_MS = 30_000;
const POOLS = "/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/pools/sandboxwarmpools";
let stack: Stack;
let server: ApiserverProcess;
const sims: SandboxdSim[] = [];
let publishing = true;
let publisherLoop: Promise<void>;

beforeAll(async () => {
  stack = await startStack();
  for (let i = 0; i < 2; i++) sims.push(await startSandboxdSim({ rootToken: ROOT, provisionLatencyMs: 200 }));
  await stack.cluster.createNamespace("pools");
  publisherLoop = (async () => {
    while (publishing) {
      const at = rfc3339(Date.now());
      await Promise.all(
        sims.map((s, i) =>
          stack.publish({
            node: `n${i + 1}`,
            address: s.addr,
            publishedAt: at,
            pools: s.info().pools.map((p) => ({ template: p.key.template, net: p.key.net, size: p.key.size, warm: p.warm, target: p.target })),
          }),
        ),
      );
      await Bun.sleep(1000);
    }
  })();
  await stack.cluster.apply([
    { apiVersion: "extensions.agents.x-k8s.io/v1beta1", kind: "SandboxTemplate", metadata: { name: "t", namespace: "pools" }, spec: { podTemplate: { spec: { containers: [{ name: "c", image: IMG }] } } } },
    {
      apiVersion: "extensions.agents.x-k8s.io/v1beta1",
      kind: "SandboxWarmPool",
      metadata: {
        name: "auto",
        namespace: "pools",
        annotations: { "sandbox.cocoonstack.io/autoscale-enabled": "true", "sandbox.cocoonstack.io/autoscale-min": "2", "sandbox.cocoonstack.io/autoscale-max": "6" },
      },
      spec: { replicas: 3, sandboxTemplateRef: { name: "t" } },
    },
  ]);
  server = await stack.startServer({ args: [`--sandboxd-token=${ROOT}`, "--warm-pool-sync-interval=1s"] });
  await stack.register(server.port);
}, 120_000);

afterAll(async () => {
  publishing = false;
  await publisherLoop;
  await server?.stop();
  await Promise.all(sims.map((s) => s.stop()));
  await stack?.stop();
});

/** The fleet's target for IMG: what the driver last PUT, summed over the nodes. */
const fleetTarget = () => sims.reduce((sum, s) => sum + (s.info().pools.find((p) => p.key.template === IMG)?.target ?? 0), 0);
async function decision(): Promise<{ target?: number; min?: number; max?: number; refillMeasured?: boolean } | undefined> {
  const r = await stack.cluster.adminFetch(`${POOLS}/auto`);
  const raw = ((await r.json()) as { metadata: { annotations?: Record<string, string> } }).metadata.annotations?.["sandbox.cocoonstack.io/autoscale-status"];
  return raw === undefined ? undefined : JSON.parse(raw);
}
const claim = (name: string) =>
  stack.cluster.adminFetch("/apis/agents.x-k8s.io/v1beta1/namespaces/default/sandboxes", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ apiVersion: "agents.x-k8s.io/v1beta1", kind: "Sandbox", metadata: { name }, spec: { podTemplate: { spec: { containers: [{ name: "c", image: IMG }] } } } }),
  });

describe("autoscaled SandboxWarmPool", () => {
  test("no claims: the pool holds its minimum (not spec.replicas), and the decision is in the status annotation", async () => {
    await waitFor("the fleet target at the minimum 2", async () => fleetTarget() === 2, CONVERGE_MS, 100);
    const d = await waitFor("the autoscale-status annotation", async () => decision(), CONVERGE_MS, 100);
    expect(d).toMatchObject({ target: 2, min: 2, max: 6 });
  });

  test("claims through the aggregated API raise the target at once, up to the maximum; /metrics shows the decision", async () => {
    await waitFor("warm VMs at the minimum", async () => sims.reduce((s, x) => s + (x.info().pools.find((p) => p.key.template === IMG)?.warm ?? 0), 0) >= 2, CONVERGE_MS, 100);
    // Six creates in a row: 6 claims (or misses) over the short window's 5 s floor → 1.2/s, far above the 6 the
    // maximum allows (demandTarget: ceil(12 + 2.33 × √12) + 2 on one node).
    for (let i = 0; i < 6; i++) await (await claim(`c${i}`)).body?.cancel();
    await waitFor("the fleet target at the maximum 6", async () => fleetTarget() === 6, CONVERGE_MS, 100);
    await waitFor("the annotation to say 6", async () => (await decision())?.target === 6, CONVERGE_MS, 100);
    const token = await metricsToken();
    const text = await waitFor("metrics", async () => {
      const r = await fetch(`https://127.0.0.1:${server.port}/metrics`, { headers: { authorization: `Bearer ${token}` }, tls: { ca: stack.caPem } });
      return r.status === 200 ? r.text() : undefined;
    }, 15_000);
    expect(text).toContain('sandbox_warmpool_autoscale_target{namespace="pools",pool="auto"} 6');
    // 6 over the time since they began: 1.2/s at the floor (5 s), 0.4/s once the span is the whole 15 s window.
    const rate = Number(/sandbox_warmpool_claims_per_second\{namespace="pools",pool="auto"\} ([\d.]+)/.exec(text)?.[1]);
    expect(rate).toBeGreaterThanOrEqual(0.39);
    expect(rate).toBeLessThanOrEqual(1.21);
    expect(text).toMatch(/sandbox_warmpool_refill_seconds\{namespace="pools",pool="auto"\} \d/);
  });

  test("the apiserver's ServiceAccount may write that annotation and nothing else of a pool", async () => {
    const as = (patch: object) =>
      kubectl(["patch", "sandboxwarmpool", "auto", "-n", "pools", "--type", "merge", "-p", JSON.stringify(patch)], { kubeconfig: stack.serverKubeconfig });
    const spec = await as({ spec: { replicas: 9 } });
    expect(spec.code).not.toBe(0);
    expect(spec.stderr).toContain("sandbox-apiserver may change only the annotations sandbox.cocoonstack.io/autoscale-status and sandbox.cocoonstack.io/sleep-status of a SandboxWarmPool");
    const other = await as({ metadata: { annotations: { "sandbox.cocoonstack.io/autoscale-max": "1000" } } });
    expect(other.code).not.toBe(0);
    expect(other.stderr).toContain("may change only the annotation");
    const own = await as({ metadata: { annotations: { "sandbox.cocoonstack.io/autoscale-status": '{"target":6}' } } });
    expect(own.stderr).toBe("");
    expect(own.code).toBe(0);
  });

  test("autoscaling off: spec.replicas wins again and the stale decision is removed", async () => {
    const r = await kubectl(["annotate", "--overwrite", "sandboxwarmpool", "auto", "-n", "pools", "sandbox.cocoonstack.io/autoscale-enabled=false"], { kubeconfig: stack.admin });
    expect(r.code).toBe(0);
    await waitFor("the fleet target at spec.replicas 3", async () => fleetTarget() === 3, CONVERGE_MS, 100);
    await waitFor("the annotation removed", async () => (await decision()) === undefined, CONVERGE_MS, 100);
  });
});

async function metricsToken(): Promise<string> {
  await stack.cluster.apply(`
apiVersion: v1
kind: ServiceAccount
metadata: {name: autoscale-scraper, namespace: default}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: autoscale-metrics-reader}
rules: [{nonResourceURLs: [/metrics], verbs: [get]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: autoscale-metrics-reader}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: autoscale-metrics-reader}
subjects: [{kind: ServiceAccount, name: autoscale-scraper, namespace: default}]
`);
  return stack.cluster.serviceAccountToken("default", "autoscale-scraper");
}
