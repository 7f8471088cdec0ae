// The e2b REST surface as one hono app (docs/e2b.md), shared by sandbox-e2b and sandbox-apiserver. This is the one
// place that authenticates: `X-API-KEY` against every configured key in constant time (anonymous mode only when no
// key exists), except /health, /openapi.json and the routes a build module registers as signed. The routes live in
// per-resource route files (routes-sandboxes.ts, routes-templates.ts) registered through a RouteKit (route-kit.ts);
// an optional build module mounts its routes through `buildRoutes`. The e2b routes not served here answer 501 from
// unserved.ts (docs/e2b-routes.md).
import { OpenAPIHono, createRoute, type RouteConfig } from "@hono/zod-openapi";
import type { Logger } from "../log/index.ts";
import { E2bError, errorResponse } from "./errors.ts";
import { honoPath, noContent, type BuildMount, type BuildRoutes, type E2bEnv, type E2bHandler, type SignedHandler } from "./route-kit.ts";
import { registerSandboxRoutes } from "./routes-sandboxes.ts";
import { registerTemplateRoutes } from "./routes-templates.ts";
import type { E2bSurface } from "./surface.ts";
import { safeEqual } from "./tokens.ts";
import { UnservedRoutes, pathPattern, routedMethod } from "./unserved.ts";

export interface E2bAppOptions {
  surface: E2bSurface;
  /** key -> namespace; undefined or empty = anonymous mode (every request in `defaultNamespace`). */
  keys: ReadonlyMap<string, string> | undefined;
  defaultNamespace: string;
  log: Logger;
  /** The template-build module's routes (served behind --e2b-builds); unset = the build routes answer 501. */
  buildRoutes?: BuildRoutes;
}

/** The namespace of a key, comparing against EVERY configured key so the time taken does not depend on which. */
export function namespaceForKey(keys: ReadonlyMap<string, string>, presented: string): string | undefined {
  let hit: string | undefined;
  for (const [key, ns] of keys) if (safeEqual(presented, key) && hit === undefined) hit = ns;
  return hit;
}

export function createE2bApp(o: E2bAppOptions): OpenAPIHono<E2bEnv> {
  const { surface, log } = o;
  const app = new OpenAPIHono<E2bEnv>();
  const anonymous = !o.keys || o.keys.size === 0;
  // /openapi.json documents routes, not tenants: public like e2b cloud's spec. The quota series name every
  // namespace, so they are served by the process's metrics listener, never here (docs/decisions.md "e2b quota
  // metrics off the e2b listener").
  const unauthenticated = new Set(["/health", "/openapi.json"]);
  // Routes that authenticate themselves (a build module's signed upload PUT): exact method and path pattern.
  const signed: Array<{ method: string; path: RegExp }> = [];
  const isSigned = (method: string, path: string) => signed.some((r) => r.method === method && r.path.test(path));

  // e2b's routes this server does not serve (unserved.ts, docs/e2b-routes.md): 501 naming the route, behind the key
  // check when e2b authenticates the route with X-API-Key, else to anyone (a volume token or a dashboard token is
  // nothing we issue). Never registered on the router, and so never in /openapi.json, which describes what is served.
  const unserved = new UnservedRoutes({ buildsMounted: o.buildRoutes !== undefined });
  // Every served route's method and path pattern: a request one of them matches is never refused as unserved.
  const served: Array<{ method: string; path: RegExp }> = [];
  const isServed = (method: string, path: string) => served.some((r) => r.method === routedMethod(method) && r.path.test(path));

  app.use("*", async (c, next) => {
    if (unauthenticated.has(c.req.path) || isSigned(c.req.method, c.req.path)) return next();
    let refusal = unserved.match(c.req.method, c.req.path, () => new URL(c.req.url).pathname);
    if (refusal && isServed(c.req.method, c.req.path)) refusal = undefined;
    if (refusal && !refusal.needsKey) return errorResponse(501, refusal.message);
    if (anonymous) {
      c.set("namespace", o.defaultNamespace);
    } else {
      const ns = namespaceForKey(o.keys!, c.req.header("x-api-key") ?? "");
      if (ns === undefined) return errorResponse(401, "invalid API key");
      c.set("namespace", ns);
    }
    if (refusal) return errorResponse(501, refusal.message);
    return next();
  });

  const route = (cfg: RouteConfig, handler: E2bHandler) => {
    app.openAPIRegistry.registerPath({ ...cfg, security: unauthenticated.has(cfg.path) ? [] : [{ ApiKeyAuth: [] }] });
    served.push({ method: cfg.method.toUpperCase(), path: pathPattern(cfg.path) });
    app.on(cfg.method.toUpperCase(), honoPath(cfg.path), (c) => handler(c, c.get("namespace")));
  };
  const signedRoute = (cfg: RouteConfig, handler: SignedHandler) => {
    // A `{param}` is one non-empty path segment, as the router matches it.
    const pattern = cfg.path.replace(/[.*+?^$()|[\]\\]/g, "\\$&").replace(/\{\w+\}/g, "[^/]+");
    signed.push({ method: cfg.method.toUpperCase(), path: new RegExp(`^${pattern}$`) });
    served.push({ method: cfg.method.toUpperCase(), path: pathPattern(cfg.path) });
    app.openAPIRegistry.registerPath({ ...cfg, security: [] });
    app.on(cfg.method.toUpperCase(), honoPath(cfg.path), (c) => handler(c));
  };

  route(createRoute({ method: "get", path: "/health", responses: noContent("Alive") }), () => new Response(null, { status: 204 }));
  const mount: BuildMount = { route, signedRoute };
  registerSandboxRoutes(mount, surface);
  registerTemplateRoutes(mount, surface, o.buildRoutes);

  app.openAPIRegistry.registerComponent("securitySchemes", "ApiKeyAuth", { type: "apiKey", in: "header", name: "X-API-KEY" });
  // Built once, on the first request (every route is registered by then): rebuilding it cost 2.7 ms CPU per request.
  let openapi: string | undefined;
  app.get("/openapi.json", () => {
    openapi ??= JSON.stringify(
      app.getOpenAPI31Document({
        openapi: "3.1.0",
        info: { title: "e2b-compatible sandbox API", version: "1", description: "The e2b REST surface of the sandbox control plane (docs/e2b.md)." },
      }),
    );
    return new Response(openapi, { headers: { "content-type": "application/json" } });
  });

  app.notFound((c) => errorResponse(404, `no route ${c.req.method} ${c.req.path}`));
  app.onError((err, c) => {
    if (err instanceof E2bError) {
      if (err.detail) log.warn({ status: err.status, detail: err.detail, method: c.req.method, path: c.req.path }, "node refused an e2b request");
      return errorResponse(err.status, err.message, err.headers, err.errorCode);
    }
    log.error({ err, method: c.req.method, path: c.req.path }, "e2b request failed");
    return errorResponse(500, "internal error");
  });
  return app;
}
