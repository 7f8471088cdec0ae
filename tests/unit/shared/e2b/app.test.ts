// The e2b app's document route: /openapi.json is served without a key and built once per process (rebuilding the
// document cost 2.7 ms CPU per request, so anyone could burn the surface's CPU with it); /metrics is not served here.
import { describe, expect, test } from "bun:test";
import { createE2bApp } from "#shared/e2b/app.ts";
import { E2bSurface } from "#shared/e2b/surface.ts";
import { createLogger } from "#shared/log/index.ts";
import { Registry } from "#shared/metrics/index.ts";

const log = createLogger({ level: "error", name: "test" });
const fleet = { nodes: () => [], ready: () => Promise.resolve(), stop: () => Promise.resolve() };

function app() {
  const surface = new E2bSurface(
    { namespace: "team-a", domain: "sb.test", envdVersion: "0.8.0", defaultTimeoutSeconds: 300, aliases: new Map(), envdSecret: "s", rootToken: "r" },
    { fleet, log },
  );
  return createE2bApp({ surface, keys: new Map([["k", "team-a"]]), defaultNamespace: "team-a", log });
}

describe("/openapi.json", () => {
  test("no key needed; the document is generated once and served as the same bytes after", async () => {
    const a = app();
    let builds = 0;
    const original = a.getOpenAPI31Document.bind(a);
    a.getOpenAPI31Document = ((...args: Parameters<typeof original>) => {
      builds++;
      return original(...args);
    }) as typeof a.getOpenAPI31Document;
    const bodies: string[] = [];
    for (let i = 0; i < 5; i++) {
      const r = await a.request("/openapi.json");
      expect(r.status).toBe(200);
      expect(r.headers.get("content-type")).toContain("application/json");
      bodies.push(await r.text());
    }
    expect(builds).toBe(1);
    expect(new Set(bodies).size).toBe(1);
    const doc = JSON.parse(bodies[0]!);
    expect(doc.paths["/sandboxes"].post.responses["429"]).toBeDefined();
  });

  test("/metrics is not an e2b route (the quota series name every namespace): 401 without a key, 404 with one", async () => {
    const a = app();
    const keyless = await a.request("/metrics");
    expect(keyless.status).toBe(401);
    expect(await keyless.text()).not.toContain("e2b_namespace");
    const keyed = await a.request("/metrics", { headers: { "x-api-key": "k" } });
    expect(keyed.status).toBe(404);
    expect(await keyed.text()).not.toContain("e2b_namespace");
    expect((await a.request("/sandboxes")).status).toBe(401);
  });

  test("the quota series join the registry the process hands in (sandbox-apiserver's own /metrics)", async () => {
    const registry = new Registry();
    new E2bSurface(
      { namespace: "team-a", domain: "sb.test", envdVersion: "0.8.0", defaultTimeoutSeconds: 300, aliases: new Map(), envdSecret: "s", rootToken: "r" },
      { fleet, log, metricsRegistry: registry },
    );
    expect(await registry.metrics()).toContain('e2b_namespace_sandboxes{namespace="team-a"} 0');
  });
});
