// The daemon's own metrics (issue 13 item 1): each adapter counts what passes through it, by outcome.
import { describe, expect, test } from "bun:test";
import { SandboxdCapacity, SandboxdNotFound, SandboxdTransport } from "#shared/sandboxd/errors.ts";
import { verbOf, VkSandboxMetrics } from "#services/vk-sandbox/metrics.ts";

const ctx = { node: "n", route: "r" };
const value = async (m: VkSandboxMetrics, name: string, labels: Record<string, string>) => {
  const metric = (await m.registry.getMetricsAsJSON()).find((x) => x.name === name);
  const v = (metric?.values as Array<{ value: number; labels: Record<string, string | number>; metricName?: string }> | undefined)?.find(
    (x) => (x.metricName ?? name) === name && Object.entries(labels).every(([k, want]) => String(x.labels[k]) === want),
  );
  return v?.value ?? 0;
};

describe("verbOf", () => {
  test.each([
    ["GET", "https://k/api/v1/pods?fieldSelector=x", "list"],
    ["GET", "https://k/api/v1/pods?watch=1&resourceVersion=5", "watch"],
    ["GET", "https://k/api/v1/namespaces/ns/pods", "list"],
    ["GET", "https://k/api/v1/namespaces/ns/pods/p", "get"],
    ["GET", "https://k/api/v1/namespaces/ns", "get"],
    ["GET", "https://k/api/v1/nodes/n", "get"],
    ["GET", "https://k/apis/agents.x-k8s.io/v1beta1/namespaces/ns/sandboxes/s", "get"],
    ["GET", "https://k/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", "list"],
    ["PUT", "https://k/api/v1/namespaces/ns/pods/p/status", "update"],
    ["PATCH", "https://k/api/v1/nodes/n/status", "patch"],
    ["POST", "https://k/api/v1/namespaces/ns/events", "create"],
    ["DELETE", "https://k/api/v1/namespaces/ns/pods/p", "delete"],
  ])("%s %s -> %s", (method, url, verb) => {
    expect(verbOf(method, url)).toBe(verb);
  });
});

describe("VkSandboxMetrics", () => {
  const reply = { id: "sb_1", token: "t", deadline: "2026-01-01T00:00:00Z", owner_addr: "10.0.0.5:7777" };
  const sandboxd = (claim: () => Promise<typeof reply>, release: () => Promise<"released" | "already-gone">) => ({
    claim,
    release,
    list: async () => {
      throw new SandboxdTransport("refused", ctx, { delivered: "no" });
    },
    get: async () => ({ ...reply, key: { template: "t", net: "none" as const, size: "small" as const }, deadline: reply.deadline, hibernated: false }),
    info: async () => ({ advertise_addr: "a" }),
  });

  test("claims by outcome with latency, releases by outcome, sandboxd errors by route", async () => {
    const m = new VkSandboxMetrics();
    let next: () => Promise<typeof reply> = async () => reply;
    const s = m.sandboxd(sandboxd(() => next(), async () => "released"));
    await s.claim({ template: "t" }, { followRedirects: false, reconcile: false });
    next = async () => {
      throw new SandboxdCapacity("429", { ...ctx, status: 429 });
    };
    await expect(s.claim({ template: "t" }, { followRedirects: false, reconcile: false })).rejects.toThrow();
    await s.release("sb_1", {});
    await expect(s.list()).rejects.toThrow();
    expect(await value(m, "vk_sandbox_claims_total", { outcome: "ok" })).toBe(1);
    expect(await value(m, "vk_sandbox_claims_total", { outcome: "capacity" })).toBe(1);
    expect(await value(m, "vk_sandbox_releases_total", { outcome: "released" })).toBe(1);
    expect(await value(m, "vk_sandbox_sandboxd_errors_total", { route: "list" })).toBe(1);
    expect(await value(m, "vk_sandbox_sandboxd_errors_total", { route: "claim" })).toBe(0); // capacity is not an error
    const text = (await m.exposition()).body;
    expect(text).toContain('vk_sandbox_claim_seconds_count{outcome="ok"} 1');
  });

  test("a release answered 404 counts as already gone, not as an error", async () => {
    const m = new VkSandboxMetrics();
    const s = m.sandboxd(
      sandboxd(
        async () => reply,
        async () => {
          throw new SandboxdNotFound("unknown sandbox", { ...ctx, status: 404 });
        },
      ),
    );
    await expect(s.release("sb_1", { token: "t" })).rejects.toThrow();
    expect(await value(m, "vk_sandbox_releases_total", { outcome: "already_gone" })).toBe(1);
    expect(await value(m, "vk_sandbox_sandboxd_errors_total", { route: "release" })).toBe(0);
  });

  test("apiserver requests by verb and code; queue depth read at scrape time", async () => {
    const m = new VkSandboxMetrics();
    const t = m.kubeTransport(async (url) => new Response("{}", { status: url.includes("missing") ? 404 : 200 }));
    await t("https://k/api/v1/namespaces/ns/pods/p", { method: "GET", headers: {} });
    await t("https://k/api/v1/namespaces/ns/pods/missing", { method: "GET", headers: {} });
    await t("https://k/api/v1/namespaces/ns/pods/p/status", { method: "PUT", headers: {} });
    expect(await value(m, "vk_sandbox_apiserver_requests_total", { verb: "get", code: "200" })).toBe(1);
    expect(await value(m, "vk_sandbox_apiserver_requests_total", { verb: "get", code: "404" })).toBe(1);
    expect(await value(m, "vk_sandbox_apiserver_requests_total", { verb: "update", code: "200" })).toBe(1);
    // Each request's latency, by verb; a watch (a stream that lives for minutes) is not a latency.
    await t("https://k/api/v1/pods?watch=1", { method: "GET", headers: {} });
    const slow = m.kubeTransport(async () => (await Bun.sleep(30), new Response("{}")));
    await slow("https://k/api/v1/namespaces/ns/pods/p/status", { method: "PUT", headers: {} });
    const text = (await m.exposition()).body;
    expect(text).toContain('vk_sandbox_apiserver_request_seconds_count{verb="update"} 2');
    expect(text).toContain('vk_sandbox_apiserver_request_seconds_count{verb="get"} 2');
    expect(text).not.toContain('vk_sandbox_apiserver_request_seconds_count{verb="watch"}');
    const sum = Number(/vk_sandbox_apiserver_request_seconds_sum\{verb="update"\} (\S+)/.exec(text)?.[1]);
    expect(sum).toBeGreaterThanOrEqual(0.025);
    const q = { name: "sync", length: 3 };
    m.watchQueues([q]);
    expect(await value(m, "vk_sandbox_queue_depth", { queue: "sync" })).toBe(3);
    q.length = 0;
    expect(await value(m, "vk_sandbox_queue_depth", { queue: "sync" })).toBe(0);
  });
});
