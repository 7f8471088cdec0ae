// Issue 13 item 1: the daemon's own Prometheus /metrics on the kubelet API port, read from the process on a real
// kube-apiserver with the sandboxd simulator: a claim, a durable write, the status PUT, the queue wait and a release
// each show up as an operator would scrape them.
import { describe, expect, test } from "bun:test";
import { waitFor } from "../../support/wait.ts";
import { runningWithClaim, sandboxPod } from "./cluster.ts";
import { useE2eStack } from "./stack.ts";

const env = useE2eStack();

async function scrape(port: number): Promise<Map<string, number>> {
  // As a scraper holding get nodes/metrics would: here the cluster's kubelet client certificate (system:masters).
  const { certPem, keyPem } = env.e2e.cluster.kubeletClient;
  const r = await fetch(`https://127.0.0.1:${port}/metrics`, { tls: { rejectUnauthorized: false, cert: certPem, key: keyPem } });
  expect(r.status).toBe(200);
  expect(r.headers.get("content-type")).toContain("text/plain");
  const out = new Map<string, number>();
  for (const line of (await r.text()).split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const i = line.lastIndexOf(" ");
    out.set(line.slice(0, i), Number(line.slice(i + 1)));
  }
  return out;
}

describe("issue 13: /metrics on the kubelet port (process)", () => {
  test("claims, state writes, apiserver requests, queue wait and releases are counted", async () => {
    const d = env.stack.daemon({ node: "vk-metrics" });
    await d.waitForLog(/vk-sandbox ready/);
    await env.e2e.kube.createPod(sandboxPod("measured", "vk-metrics"));
    await runningWithClaim(env.e2e.kube, "ns", "measured");
    const m = await scrape(d.port);
    expect(m.get('vk_sandbox_claims_total{outcome="ok"}')).toBe(1);
    expect(m.get('vk_sandbox_claim_seconds_count{outcome="ok"}')).toBe(1);
    expect(m.get('vk_sandbox_state_write_seconds_count{outcome="ok"}')).toBeGreaterThanOrEqual(2); // startup + the claim
    expect(m.get('vk_sandbox_apiserver_requests_total{verb="update",code="200"}')).toBeGreaterThanOrEqual(1); // status PUT
    expect(m.get('vk_sandbox_apiserver_requests_total{verb="watch",code="200"}') ?? m.get('vk_sandbox_apiserver_requests_total{verb="list",code="200"}')).toBeGreaterThanOrEqual(1);
    expect(m.get('vk_sandbox_queue_wait_seconds_count{queue="sync"}')).toBeGreaterThanOrEqual(1);
    expect(m.get('vk_sandbox_queue_depth{queue="sync"}')).toBeDefined();
    // The hops an operator reads the single-Pod path by (docs/performance.md): the status PUT's latency and the
    // Pod's whole way from the informer to its Running write.
    expect(m.get('vk_sandbox_apiserver_request_seconds_count{verb="update"}')).toBeGreaterThanOrEqual(1);
    expect(m.get("vk_sandbox_pod_running_seconds_count")).toBe(1);
    expect(m.get("vk_sandbox_pod_running_seconds_sum")).toBeGreaterThan(0);

    await env.e2e.kube.deletePod("ns", "measured");
    const after = await waitFor("release counted", async () => {
      const s = await scrape(d.port);
      return (s.get('vk_sandbox_releases_total{outcome="released"}') ?? 0) >= 1 && s;
    });
    expect(after.get('vk_sandbox_release_seconds_count{outcome="released"}')).toBe(1);
    await d.kill("SIGKILL");
  }, 60_000);
});
