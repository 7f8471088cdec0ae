import { describe, expect, test } from "bun:test";
import { createKubeletApp, EMPTY_SUMMARY, NOT_IMPLEMENTED } from "#services/vk-sandbox/kubelet-api/index.ts";

const cached = [{ metadata: { name: "a", namespace: "ns" } }];
const held = [{ metadata: { name: "b", namespace: "ns" } }];
const app = createKubeletApp({ listPods: () => cached, runningPods: () => held });
const get = (path: string, init?: RequestInit) => app.request(`http://x${path}`, init);

describe("kubelet API routes", () => {
  test("/pods lists the pod cache as a v1 PodList", async () => {
    const r = await get("/pods");
    expect(r.status).toBe(200);
    expect(await r.json()).toEqual({ apiVersion: "v1", kind: "PodList", metadata: {}, items: cached });
  });

  test("/runningpods/ lists the provider's table", async () => {
    const r = await get("/runningpods/");
    expect(r.status).toBe(200);
    expect(((await r.json()) as any).items).toEqual(held);
  });

  test("the other slash form is redirected with 301, query kept", async () => {
    const a = await get("/pods/?x=1");
    expect(a.status).toBe(301);
    expect(a.headers.get("location")).toBe("/pods?x=1");
    const b = await get("/runningpods");
    expect(b.status).toBe(301);
    expect(b.headers.get("location")).toBe("/runningpods/");
  });

  test("a known path with another method is 405", async () => {
    expect((await get("/pods", { method: "POST" })).status).toBe(405);
    expect((await get("/stats/summary", { method: "DELETE" })).status).toBe(405);
  });

  test("an unknown path is 404 with the library's body", async () => {
    const r = await get("/nope");
    expect(r.status).toBe(404);
    expect(await r.text()).toBe("404 request not found");
  });

  test("stats summary answers the empty Summary on both slash forms", async () => {
    for (const p of ["/stats/summary", "/stats/summary/"]) {
      const r = await get(p);
      expect(r.status).toBe(200);
      expect(await r.json()).toEqual(EMPTY_SUMMARY);
    }
  });

  test("metrics/resource is empty Prometheus text 0.0.4 on both slash forms", async () => {
    for (const p of ["/metrics/resource", "/metrics/resource/"]) {
      const r = await get(p);
      expect(r.status).toBe(200);
      expect(r.headers.get("content-type")).toBe("text/plain; version=0.0.4");
      expect(await r.text()).toBe("");
    }
  });

  test("container logs: a valid query is 500 with the not-implemented text", async () => {
    const r = await get("/containerLogs/ns/p/c?tailLines=10&follow=true&sinceSeconds=5");
    expect(r.status).toBe(500);
    expect(await r.text()).toContain(NOT_IMPLEMENTED);
  });

  test.each([
    "tailLines=-1",
    "limitBytes=0",
    "sinceSeconds=0",
    "sinceTime=yesterday",
    "sinceSeconds=5&sinceTime=2026-01-01T00:00:00Z",
    "follow=yes",
    "timestamps=2",
    "tailLines=ten",
  ])("container logs: a bad query %s is 400", async (q) => {
    expect((await get(`/containerLogs/ns/p/c?${q}`)).status).toBe(400);
  });

  test("exec and attach: no stream or tty with stderr is 400, otherwise 501 without an upgrade", async () => {
    for (const verb of ["exec", "attach"]) {
      expect((await get(`/${verb}/ns/p/c?command=sh`)).status).toBe(400);
      expect((await get(`/${verb}/ns/p/c?stdout=1&stderr=1&tty=1`)).status).toBe(400);
      const r = await get(`/${verb}/ns/p/c?stdout=1&stdin=1&tty=1`, {
        method: "POST",
        headers: { Connection: "Upgrade", Upgrade: "SPDY/3.1" },
      });
      expect(r.status).toBe(501);
      expect(r.headers.get("upgrade")).toBeNull();
      expect(await r.text()).toContain(NOT_IMPLEMENTED);
    }
  });

  test("exec and attach: the stream names the kube-apiserver forwards (input/output/error) are read, so a proxied kubectl exec gets the 501", async () => {
    for (const verb of ["exec", "attach"]) {
      const r = await get(`/${verb}/ns/p/c?command=sh&input=1&output=1&tty=1`, { method: "POST" });
      expect(r.status).toBe(501);
      // A Status body: the kube-apiserver's stream client hands its message to kubectl.
      expect(await r.json()).toMatchObject({ kind: "Status", status: "Failure", reason: "NotImplemented", code: 501, message: NOT_IMPLEMENTED });
      expect((await get(`/${verb}/ns/p/c?command=sh&output=1&error=1&tty=1`)).status).toBe(400);
    }
  });

  test("port-forward is 501 with the not-implemented text", async () => {
    const r = await get("/portForward/ns/p", { method: "POST" });
    expect(r.status).toBe(501);
    expect(await r.text()).toContain(NOT_IMPLEMENTED);
  });
});

describe("issue 13: the daemon's own /metrics", () => {
  test("served as Prometheus text when the daemon supplies it; POST is 405; /metrics/resource stays empty", async () => {
    const withMetrics = createKubeletApp({
      listPods: () => [],
      runningPods: () => [],
      metrics: async () => ({ body: 'vk_sandbox_claims_total{outcome="ok"} 3\n', contentType: "text/plain; version=0.0.4; charset=utf-8" }),
    });
    const r = await withMetrics.request("http://x/metrics");
    expect(r.status).toBe(200);
    expect(r.headers.get("content-type")).toContain("text/plain; version=0.0.4");
    expect(await r.text()).toContain('vk_sandbox_claims_total{outcome="ok"} 3');
    expect((await withMetrics.request("http://x/metrics", { method: "POST" })).status).toBe(405);
    expect(await (await withMetrics.request("http://x/metrics/resource")).text()).toBe("");
  });

  test("without it, /metrics is the router's 404 as before", async () => {
    expect((await get("/metrics")).status).toBe(404);
  });
});
