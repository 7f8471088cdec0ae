// The canary against the stack (issue 21 item 4): sandbox-apiserver (the binary, --canary-interval=1s) behind the
// real kube-apiserver, a simulated node with guest agents (a real envd process service per sandbox) published in a
// NodeInventory. Each round claims a warm VM, runs envd /init and one command, releases it; /metrics counts the
// outcome and the claim-to-command time. The chart's SandboxCanaryFailing alert names only series the binary exports.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startSandboxdSim, type SandboxdSim } from "#services/sandboxd-sim/sim.ts";
import { exchangeOverTunnel } from "#shared/relay/index.ts";
import { SandboxdClient } from "#shared/sandboxd/index.ts";
import { render } from "../chart/helm.ts";
import { type ApiserverProcess, type Stack, rfc3339, startStack } from "./fixture.ts";
import { waitFor } from "#tests/support/wait.ts";

const ROOT = "canary-root";
const IMG = "img:canary";
let stack: Stack;
let server: ApiserverProcess;
let sim: SandboxdSim;
let publishing = true;
let publisherLoop: Promise<void>;
let token: string;
/** Pools the harness advertises beyond the sim's own (a built template's clones, as a node keeping them warm would). */
const extraPools: { template: string; net: string; size: string; warm: number; target: number }[] = [];

beforeAll(async () => {
  stack = await startStack();
  sim = await startSandboxdSim({ rootToken: ROOT, pools: [`${IMG}/none/small=2`], guestAgents: true });
  publisherLoop = (async () => {
    while (publishing) {
      const pools = [...sim.info().pools.map((p) => ({ template: p.key.template, net: p.key.net, size: p.key.size, warm: p.warm, target: p.target })), ...extraPools];
      await stack.publish({ node: "n1", address: sim.addr, publishedAt: rfc3339(Date.now()), pools });
      await Bun.sleep(1000);
    }
  })();
  server = await stack.startServer({ args: [`--sandboxd-token=${ROOT}`, "--enable-warm-pool-driver=false", "--canary-interval=1s"] });
  await stack.register(server.port);
  await stack.cluster.apply(`
apiVersion: v1
kind: ServiceAccount
metadata: {name: canary-scraper, namespace: default}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: canary-metrics-reader}
rules: [{nonResourceURLs: [/metrics], verbs: [get]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: canary-metrics-reader}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: canary-metrics-reader}
subjects: [{kind: ServiceAccount, name: canary-scraper, namespace: default}]
`);
  token = await stack.cluster.serviceAccountToken("default", "canary-scraper");
}, 120_000);

afterAll(async () => {
  publishing = false;
  await publisherLoop;
  await server?.stop();
  await sim?.stop();
  await stack?.stop();
});

async function metrics(): Promise<string> {
  return waitFor("metrics", async () => {
    const r = await fetch(`https://127.0.0.1:${server.port}/metrics`, { headers: { authorization: `Bearer ${token}` }, tls: { ca: stack.caPem } });
    return r.status === 200 ? r.text() : undefined;
  }, 15_000);
}
const labels = `node="n1",template="${IMG}",net="none",size="small"`;
const count = (text: string, outcome: string) => Number(new RegExp(`sandbox_canary_runs_total\\{${labels},outcome="${outcome}"\\} (\\d+)`).exec(text)?.[1] ?? 0);

describe("canary", () => {
  test("a round claims, runs envd /init and one command, releases: ok counted, claim-to-command time recorded, nothing left claimed", async () => {
    const text = await waitFor("two ok probes", async () => {
      const t = await metrics();
      return count(t, "ok") >= 2 ? t : undefined;
    }, 60_000, 200);
    const histCount = Number(new RegExp(`sandbox_canary_time_to_first_command_seconds_count\\{${labels}\\} (\\d+)`).exec(text)?.[1] ?? 0);
    expect(histCount).toBeGreaterThanOrEqual(2);
    const sum = Number(new RegExp(`sandbox_canary_time_to_first_command_seconds_sum\\{${labels}\\} ([\\d.e+-]+)`).exec(text)?.[1]);
    expect(sum).toBeGreaterThan(0);
    expect(sum / histCount).toBeLessThan(10);
    // The node saw the canary's claims under its claim_ref, the command ran in a guest, and each was released.
    const claims = sim.requests.filter((r) => r.route === "claim").map((r) => r.body as { claim_ref?: string });
    expect(claims.length).toBeGreaterThanOrEqual(2);
    expect(claims.every((c) => c.claim_ref === "sandbox-canary/n1")).toBe(true);
    await waitFor("every canary claim released", async () => sim.claims().filter((c) => c.claimRef === "sandbox-canary/n1").length === 0, 10_000, 50);
  }, 90_000);

  test("a node that refuses claims is counted as claim_failed", async () => {
    const before = count(await metrics(), "claim_failed");
    sim.fail("claim", 503, { error: "canary test" });
    try {
      await waitFor("a claim_failed probe", async () => count(await metrics(), "claim_failed") > before, 30_000, 200);
    } finally {
      sim.clearFaults();
    }
  }, 60_000);

  test("the chart's SandboxCanaryFailing alert uses only metric names this binary's /metrics exports", async () => {
    const objects = await render({ canary: { enabled: true }, monitoring: { prometheusRule: { enabled: true } } });
    const rule = objects.find((o) => o.kind === "PrometheusRule")!;
    const rules = (rule.spec as { groups: { rules: { alert: string; expr: string }[] }[] }).groups.flatMap((g) => g.rules);
    const alert = rules.find((r) => r.alert === "SandboxCanaryFailing");
    expect(alert).toBeDefined();
    const names = [...new Set(alert!.expr.match(/\bsandbox_[a-z_]+\b/g) ?? [])];
    expect(names).toEqual(["sandbox_canary_runs_total"]);
    const text = await metrics();
    const exported = new Set([...text.matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1]!));
    for (const n of names) expect(exported.has(n.replace(/_total$/, "")) || exported.has(n)).toBe(true);
    expect(text).toMatch(/^sandbox_canary_runs_total\{/m);
    // The deployment carries the interval; off by default, no flag and no alert.
    const deployment = objects.find((o) => o.kind === "Deployment" && o.metadata.name === "sandbox-apiserver") as unknown as { spec: { template: { spec: { containers: { args: string[] }[] } } } };
    expect(deployment.spec.template.spec.containers[0]!.args).toContain("--canary-interval=60s");
    const off = await render({ monitoring: { prometheusRule: { enabled: true } } });
    expect(JSON.stringify(off)).not.toContain("canary");
  });

  // Issue 27: a built template's envd holds its build's token, so a pooled built template's clone refuses an /init
  // with a new token unless its hash came first through instance metadata; the canary hands it that way.
  test("a pooled built template: the canary re-keys its sealed clone and runs ok", async () => {
    const BUILT = "e2b/team-c/app";
    const client = new SandboxdClient({ baseUrl: sim.url, token: ROOT });
    const src = await client.claim({ template: IMG, claim_ref: "team-c/e2b-build-x" });
    const init = await exchangeOverTunnel(
      { address: sim.addr, claimId: src.id, port: 49983, token: ROOT },
      { method: "POST", path: "/init", headers: { host: "envd", "content-type": "application/json" }, body: JSON.stringify({ accessToken: "the-build's-own" }), timeoutMs: 5_000, maxBytes: 4096 },
    );
    expect(init.status).toBe(204);
    await client.promote(src.id, { template: BUILT });
    await client.release(src.id);
    extraPools.push({ template: BUILT, net: "none", size: "small", warm: 2, target: 2 });
    const built = `node="n1",template="${BUILT}",net="none",size="small"`;
    const outcome = (t: string, o: string) => Number(new RegExp(`sandbox_canary_runs_total\\{${built},outcome="${o}"\\} (\\d+)`).exec(t)?.[1] ?? 0);
    const text = await waitFor("a probe of the built template", async () => {
      const t = await metrics();
      return outcome(t, "ok") + outcome(t, "init_failed") >= 1 ? t : undefined;
    }, 60_000, 200);
    expect(outcome(text, "init_failed")).toBe(0);
    expect(outcome(text, "ok")).toBeGreaterThanOrEqual(1);
  }, 90_000);
});
