// The build mount point of the e2b app (issue 19 item 7): a build module registers its routes through
// `buildRoutes` without touching the sandbox routes; app.ts still authenticates them, except a route the module
// registers as signed (the upload PUT), which passes the key check for exactly its method and path pattern.
// Without a build module the build routes answer 501.
import { describe, expect, test } from "bun:test";
import { createRoute } from "@hono/zod-openapi";
import { createE2bApp } from "#shared/e2b/app.ts";
import type { BuildRoutes } from "#shared/e2b/index.ts";
import { E2bSurface } from "#shared/e2b/surface.ts";
import { createLogger } from "#shared/log/index.ts";

const log = createLogger({ level: "error", name: "test" });
const fleet = { nodes: () => [], ready: () => Promise.resolve(), stop: () => Promise.resolve() };
const key = { "x-api-key": "k" };

function app(buildRoutes?: BuildRoutes) {
  const surface = new E2bSurface(
    { namespace: "team-a", domain: "sb.test", envdVersion: "0.8.0", defaultTimeoutSeconds: 300, aliases: new Map(), envdSecret: "s", rootToken: "r" },
    { fleet, log },
  );
  return createE2bApp({ surface, keys: new Map([["k", "team-a"]]), defaultNamespace: "team-a", log, ...(buildRoutes ? { buildRoutes } : {}) });
}

const builds: BuildRoutes = ({ route, signedRoute }) => {
  route(createRoute({ method: "post", path: "/v3/templates", responses: { 202: { description: "Build requested" } } }), (c, ns) => c.json({ ns }, 202));
  route(createRoute({ method: "get", path: "/templates/{templateID}/builds/{buildID}/status", responses: { 200: { description: "Status" } } }), (c, ns) =>
    c.json({ ns, template: c.req.param("templateID"), build: c.req.param("buildID") }),
  );
  signedRoute(createRoute({ method: "put", path: "/templates/{templateID}/files/{hash}", responses: { 201: { description: "Stored" } } }), (c) =>
    c.req.query("sig") === "good" ? c.body(null, 201) : c.json({ code: 403, message: "bad signature" }, 403),
  );
};

describe("build routes without a build module", () => {
  test("answer 501 naming the route (behind the key check)", async () => {
    const a = app();
    for (const [method, path] of [
      ["POST", "/v3/templates"],
      ["POST", "/v2/templates/t/builds/b"],
      ["GET", "/templates/t/builds/b/status"],
      ["GET", "/templates/t/files/h"],
    ] as const) {
      expect((await a.request(path, { method })).status).toBe(401);
      const r = await a.request(path, { method, headers: key });
      expect(r.status).toBe(501);
      expect(await r.json()).toEqual({ code: 501, message: expect.stringContaining(`${method} ${path}:`) });
    }
  });
});

describe("build routes of a mounted build module", () => {
  test("are served with the caller's namespace, behind the key check", async () => {
    const a = app(builds);
    expect((await a.request("/v3/templates", { method: "POST" })).status).toBe(401);
    const made = await a.request("/v3/templates", { method: "POST", headers: key });
    expect(made.status).toBe(202);
    expect(await made.json()).toEqual({ ns: "team-a" });
    const st = await a.request("/templates/t1/builds/b1/status", { headers: key });
    expect(await st.json()).toEqual({ ns: "team-a", template: "t1", build: "b1" });
    // Build routes the module does not register are plain unknown routes now, not 501.
    expect((await a.request("/v2/templates/t/builds/b", { method: "POST", headers: key })).status).toBe(404);
  });

  test("a signed route skips the key check for its method and pattern only; the module checks the signature", async () => {
    const a = app(builds);
    expect((await a.request("/templates/t/files/abc?sig=good", { method: "PUT" })).status).toBe(201);
    expect((await a.request("/templates/t/files/abc?sig=bad", { method: "PUT" })).status).toBe(403);
    // Same path, other method; a longer path under the pattern; the sandbox routes: all still need a key.
    expect((await a.request("/templates/t/files/abc", { method: "GET" })).status).toBe(401);
    expect((await a.request("/templates/t/files/abc/x?sig=good", { method: "PUT" })).status).toBe(401);
    expect((await a.request("/sandboxes")).status).toBe(401);
    expect((await a.request("/sandboxes", { headers: key })).status).toBe(200);
  });

  test("the mounted routes are documented in /openapi.json, the signed one without a security requirement", async () => {
    const doc = await (await app(builds).request("/openapi.json")).json();
    expect(doc.paths["/v3/templates"].post.security).toEqual([{ ApiKeyAuth: [] }]);
    expect(doc.paths["/templates/{templateID}/files/{hash}"].put.security).toEqual([]);
  });
});
