// The e2b REST surface as one hono app (docs/e2b.md), shared by sandbox-e2b and sandbox-apiserver. Each route is
// registered twice from one config: in the OpenAPI registry (so `GET /openapi.json` documents it with the zod
// schemas of schemas.ts) and on the router, whose handler validates with the very same schemas (body.ts). Auth:
// `X-API-KEY` against every configured key in constant time; anonymous mode only when no key exists.
import { OpenAPIHono, createRoute, z, type RouteConfig } from "@hono/zod-openapi";
import type { Context } from "hono";
import type { Logger } from "../log/index.ts";
import { readJsonBody, readQuery } from "./body.ts";
import { E2bError, errorResponse } from "./errors.ts";
import * as S from "./schemas.ts";
import type { E2bSurface } from "./surface.ts";
import { safeEqual } from "./tokens.ts";

type Env = { Variables: { namespace: string } };
type Handler = (c: Context<Env>, ns: string) => Promise<Response> | Response;

const json = (schema: z.ZodType, description: string) => ({ content: { "application/json": { schema } }, description });
const errors = {
  400: json(S.ErrorSchema, "Invalid request"),
  401: json(S.ErrorSchema, "Missing or invalid X-API-KEY"),
  404: json(S.ErrorSchema, "Not found (also: exists in another namespace)"),
  500: json(S.ErrorSchema, "Server or node failure"),
};
const quotaErrors = { 429: { ...json(S.ErrorSchema, "Namespace quota exceeded (max-sandboxes or creates-per-second)"), headers: z.object({ "Retry-After": z.string() }) } };
const noContent = (description: string) => ({ 204: { description } });
const jsonBody = (schema: z.ZodType, required: boolean) => ({ body: { content: { "application/json": { schema } }, required } });
const idParams = { params: S.IdParam };

export interface E2bAppOptions {
  surface: E2bSurface;
  /** key -> namespace; undefined or empty = anonymous mode (every request in `defaultNamespace`). */
  keys: ReadonlyMap<string, string> | undefined;
  defaultNamespace: string;
  log: Logger;
  /** The template-build module's routes (served behind --e2b-builds); unset = the build routes answer 501. */
  buildRoutes?: (mount: { route: (cfg: RouteConfig, handler: Handler) => void; signedRoute: (cfg: RouteConfig, handler: (c: Context<Env>) => Promise<Response> | Response) => void }) => void;
}

/** The namespace of a key, comparing against EVERY configured key so the time taken does not depend on which. */
export function namespaceForKey(keys: ReadonlyMap<string, string>, presented: string): string | undefined {
  let hit: string | undefined;
  for (const [key, ns] of keys) if (safeEqual(presented, key) && hit === undefined) hit = ns;
  return hit;
}

export function createE2bApp(o: E2bAppOptions): OpenAPIHono<Env> {
  const { surface, log } = o;
  const app = new OpenAPIHono<Env>();
  const anonymous = !o.keys || o.keys.size === 0;
  // /openapi.json documents routes, not tenants: public like e2b cloud's spec. The quota series name every
  // namespace, so they are served by the process's metrics listener, never here (docs/decisions.md "e2b quota
  // metrics off the e2b listener").
  const unauthenticated = new Set(["/health", "/openapi.json"]);
  // Routes that authenticate themselves (the build module's signed upload PUT): exact method and path pattern.
  const signed: Array<{ method: string; path: RegExp }> = [];
  const isSigned = (method: string, path: string) => signed.some((r) => r.method === method && r.path.test(path));

  app.use("*", async (c, next) => {
    if (unauthenticated.has(c.req.path) || isSigned(c.req.method, c.req.path)) return next();
    if (anonymous) {
      c.set("namespace", o.defaultNamespace);
      return next();
    }
    const ns = namespaceForKey(o.keys!, c.req.header("x-api-key") ?? "");
    if (ns === undefined) return errorResponse(401, "invalid API key");
    c.set("namespace", ns);
    return next();
  });

  const route = (cfg: RouteConfig, handler: Handler) => {
    app.openAPIRegistry.registerPath({ ...cfg, security: unauthenticated.has(cfg.path) ? [] : [{ ApiKeyAuth: [] }] });
    const path = cfg.path.replace(/\{(\w+)\}/g, ":$1");
    app.on(cfg.method.toUpperCase(), path, (c) => handler(c, c.get("namespace")));
  };
  // Routes this server does not serve answer 501 naming the route, and stay out of /openapi.json: the document
  // describes what is served.
  const unserved = (method: string, path: string, handler: Handler) => app.on(method, path.replace(/\{(\w+)\}/g, ":$1"), (c) => handler(c, c.get("namespace")));
  const id = (c: Context<Env>) => c.req.param("sandboxID") ?? "";
  const notServed = (what: string): Handler => (c) => errorResponse(501, `${c.req.method} ${c.req.path}: ${what} is not served by this server`);

  route(createRoute({ method: "get", path: "/health", responses: noContent("Alive") }), () => new Response(null, { status: 204 }));

  // Create ----------------------------------------------------------------------------------------------------
  for (const path of ["/sandboxes", "/v2/sandboxes"]) {
    route(
      createRoute({ method: "post", path, request: jsonBody(S.NewSandbox, true), responses: { 201: json(S.SandboxSchema, "Created"), 503: json(S.ErrorSchema, "No warm capacity"), ...quotaErrors, ...errors } }),
      async (c, ns) => c.json(await surface.create(ns, await readJsonBody(c.req.raw, S.NewSandbox, true)), 201),
    );
  }

  // List (literal paths first: they beat /sandboxes/{sandboxID}) ------------------------------------------------
  route(
    createRoute({ method: "get", path: "/sandboxes/metrics", request: { query: S.MetricsQuery }, responses: { 200: json(S.SandboxesWithMetrics, "Metrics by id"), ...errors } }),
    async (c, ns) => c.json({ sandboxes: await surface.metricsMany(ns, readQuery(c.req.raw, S.MetricsQuery).sandbox_ids) }),
  );
  route(
    createRoute({ method: "get", path: "/sandboxes", request: { query: S.ListQuery }, responses: { 200: json(z.array(S.ListedSandbox), "Every match"), ...errors } }),
    (c, ns) => c.json(surface.list(ns, readQuery(c.req.raw, S.ListQuery), false).items),
  );
  route(
    createRoute({ method: "get", path: "/v2/sandboxes", request: { query: S.ListQuery }, responses: { 200: { ...json(z.array(S.ListedSandbox), "One page"), headers: z.object({ "X-Next-Token": z.string().optional() }) }, ...errors } }),
    (c, ns) => {
      const { items, nextToken } = surface.list(ns, readQuery(c.req.raw, S.ListQuery), true);
      if (nextToken) c.header("X-Next-Token", nextToken);
      return c.json(items);
    },
  );

  // One sandbox ------------------------------------------------------------------------------------------------
  route(createRoute({ method: "get", path: "/sandboxes/{sandboxID}", request: idParams, responses: { 200: json(S.SandboxDetailSchema, "Live state"), ...errors } }), async (c, ns) =>
    c.json(await surface.get(ns, id(c))),
  );
  route(createRoute({ method: "delete", path: "/sandboxes/{sandboxID}", request: idParams, responses: { ...noContent("Killed"), ...errors } }), async (c, ns) => {
    await surface.kill(ns, id(c));
    return c.body(null, 204);
  });
  route(
    createRoute({ method: "post", path: "/sandboxes/{sandboxID}/timeout", request: { ...idParams, ...jsonBody(S.TimeoutBody, true) }, responses: { ...noContent("Lease renewed"), 409: json(S.ErrorSchema, "Archived"), ...errors } }),
    async (c, ns) => {
      await surface.setTimeout(ns, id(c), (await readJsonBody(c.req.raw, S.TimeoutBody, true)).timeout);
      return c.body(null, 204);
    },
  );
  route(
    createRoute({ method: "post", path: "/sandboxes/{sandboxID}/refreshes", request: { ...idParams, ...jsonBody(S.RefreshBody, false) }, responses: { ...noContent("Lease renewed"), ...errors } }),
    async (c, ns) => {
      await surface.refresh(ns, id(c), (await readJsonBody(c.req.raw, S.RefreshBody, false)).duration);
      return c.body(null, 204);
    },
  );
  route(
    createRoute({ method: "post", path: "/sandboxes/{sandboxID}/pause", request: { ...idParams, ...jsonBody(S.PauseBody, false) }, responses: { ...noContent("Paused"), 409: json(S.ErrorSchema, "Already paused"), ...errors } }),
    async (c, ns) => {
      await surface.pause(ns, id(c), (await readJsonBody(c.req.raw, S.PauseBody, false)).memory);
      return c.body(null, 204);
    },
  );
  for (const path of ["/sandboxes/{sandboxID}/connect", "/v2/sandboxes/{sandboxID}/connect"]) {
    route(
      createRoute({ method: "post", path, request: { ...idParams, ...jsonBody(S.ConnectBody, false) }, responses: { 200: json(S.SandboxSchema, "Was running"), 201: json(S.SandboxSchema, "Resumed"), ...quotaErrors, ...errors } }),
      async (c, ns) => {
        const r = await surface.connect(ns, id(c), await readJsonBody(c.req.raw, S.ConnectBody, false), "connect");
        return c.json(r.sandbox, r.status);
      },
    );
  }
  route(
    createRoute({ method: "post", path: "/sandboxes/{sandboxID}/resume", request: { ...idParams, ...jsonBody(S.ResumeBody, false) }, responses: { 201: json(S.SandboxSchema, "Resumed"), 409: json(S.ErrorSchema, "Already running"), ...quotaErrors, ...errors } }),
    async (c, ns) => {
      const r = await surface.connect(ns, id(c), await readJsonBody(c.req.raw, S.ResumeBody, false), "resume");
      return c.json(r.sandbox, 201);
    },
  );
  route(
    createRoute({ method: "post", path: "/sandboxes/{sandboxID}/fork", request: { ...idParams, ...jsonBody(S.ForkBody, false) }, responses: { 201: json(z.array(S.ForkResult), "Children"), 409: json(S.ErrorSchema, "Parent paused"), ...quotaErrors, ...errors } }),
    async (c, ns) => {
      const children = await surface.fork(ns, id(c), await readJsonBody(c.req.raw, S.ForkBody, false));
      return c.json(
        children.map((sandbox) => ({ sandbox })),
        201,
      );
    },
  );
  route(
    createRoute({ method: "post", path: "/sandboxes/{sandboxID}/snapshots", request: { ...idParams, ...jsonBody(S.SnapshotBody, false) }, responses: { 201: json(S.SnapshotInfo, "Snapshot taken"), ...errors } }),
    async (c, ns) => c.json(await surface.snapshots.createSnapshot(ns, id(c), (await readJsonBody(c.req.raw, S.SnapshotBody, false)).name), 201),
  );
  route(createRoute({ method: "get", path: "/sandboxes/{sandboxID}/metrics", request: idParams, responses: { 200: json(z.array(S.SandboxMetric), "Metrics"), ...errors } }), async (c, ns) =>
    c.json(await surface.metrics(ns, id(c))),
  );
  route(createRoute({ method: "get", path: "/sandboxes/{sandboxID}/logs", request: idParams, responses: { 200: json(S.SandboxLogs, "No log storage: empty"), ...errors } }), async (c, ns) => {
    await surface.assertVisible(ns, id(c));
    return c.json({ logs: [], logEntries: [] });
  });
  route(createRoute({ method: "get", path: "/v2/sandboxes/{sandboxID}/logs", request: idParams, responses: { 200: json(S.SandboxLogsV2, "No log storage: empty"), ...errors } }), async (c, ns) => {
    await surface.assertVisible(ns, id(c));
    return c.json({ logs: [] });
  });
  unserved("PUT", "/sandboxes/{sandboxID}/network", notServed("updating a sandbox's network"));

  // Snapshots ---------------------------------------------------------------------------------------------------
  route(
    createRoute({ method: "get", path: "/snapshots", request: { query: S.SnapshotsQuery }, responses: { 200: { ...json(z.array(S.SnapshotInfo), "One page"), headers: z.object({ "X-Next-Token": z.string().optional() }) }, ...errors } }),
    async (c, ns) => {
      const { items, nextToken } = await surface.snapshots.listSnapshots(ns, readQuery(c.req.raw, S.SnapshotsQuery));
      if (nextToken) c.header("X-Next-Token", nextToken);
      return c.json(items);
    },
  );

  // Templates (literal paths before /templates/{templateID}) ------------------------------------------------------
  for (const path of ["/templates", "/v2/templates"]) {
    route(createRoute({ method: "get", path, responses: { 200: json(z.array(S.TemplateSchema), "Pool images and built templates"), ...errors } }), (c, ns) => c.json(surface.catalog.templates(ns)));
  }
  route(createRoute({ method: "get", path: "/templates/aliases/{alias}", request: { params: S.AliasParam }, responses: { 200: json(S.TemplateAliasResponse, "Known"), ...errors } }), (c, ns) =>
    c.json(surface.catalog.templateAlias(ns, c.req.param("alias") ?? "")),
  );
  route(createRoute({ method: "post", path: "/templates/tags", request: jsonBody(S.AssignTagsBody, true), responses: { 201: json(S.AssignTagsReply, "Tags point at the build"), ...errors } }), async (c, ns) => {
    const b = await readJsonBody(c.req.raw, S.AssignTagsBody, true);
    return c.json(await surface.catalog.assignTags(ns, b.target, b.tags), 201);
  });
  route(createRoute({ method: "delete", path: "/templates/tags", request: jsonBody(S.RemoveTagsBody, true), responses: { ...noContent("Tags removed"), ...errors } }), async (c, ns) => {
    const b = await readJsonBody(c.req.raw, S.RemoveTagsBody, true);
    await surface.catalog.removeTags(ns, b.name, b.tags);
    return c.body(null, 204);
  });
  route(createRoute({ method: "get", path: "/templates/{templateID}/tags", request: { params: S.TemplateParam }, responses: { 200: json(z.array(S.TemplateTag), "Live tags"), ...errors } }), async (c, ns) =>
    c.json(await surface.catalog.templateTags(ns, c.req.param("templateID") ?? "")),
  );
  if (o.buildRoutes) {
    o.buildRoutes({
      route,
      signedRoute: (cfg, handler) => {
        const pattern = cfg.path.replace(/[.*+?^$()|[\]\\]/g, "\\$&").replace(/\{\w+\}/g, "[^/]+");
        signed.push({ method: cfg.method.toUpperCase(), path: new RegExp(`^${pattern}$`) });
        app.openAPIRegistry.registerPath({ ...cfg, security: [] });
        app.on(cfg.method.toUpperCase(), cfg.path.replace(/\{(\w+)\}/g, ":$1"), (c) => handler(c));
      },
    });
  } else {
    unserved("POST", "/v3/templates", notServed("template builds"));
    unserved("POST", "/v2/templates/{templateID}/builds/{buildID}", notServed("template builds"));
    unserved("GET", "/templates/{templateID}/builds/{buildID}/status", notServed("template builds"));
    unserved("GET", "/templates/{templateID}/files/{hash}", notServed("template build uploads"));
  }
  route(createRoute({ method: "get", path: "/templates/{templateID}", request: { params: S.TemplateParam }, responses: { 200: json(S.TemplateWithBuilds, "A built template and its builds"), ...errors } }), (c, ns) =>
    c.json(surface.catalog.templateDetail(ns, c.req.param("templateID") ?? "")),
  );
  route(createRoute({ method: "patch", path: "/templates/{templateID}", request: { params: S.TemplateParam, ...jsonBody(S.TemplateUpdate, false) }, responses: { 200: { description: "Accepted (every template here is public)" }, ...errors } }), async (c, ns) => {
    await readJsonBody(c.req.raw, S.TemplateUpdate, false);
    surface.catalog.templateDetail(ns, c.req.param("templateID") ?? "");
    return c.body(null, 200);
  });
  route(createRoute({ method: "delete", path: "/templates/{templateID}", request: { params: S.TemplateParam }, responses: { ...noContent("Deleted"), ...errors } }), async (c, ns) => {
    await surface.snapshots.deleteTemplate(ns, c.req.param("templateID") ?? "");
    return c.body(null, 204);
  });
  for (const path of ["/teams", "/secrets", "/volumes"]) {
    unserved("GET", path, notServed(path.slice(1)));
  }

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
      return errorResponse(err.status, err.message, err.headers);
    }
    log.error({ err, method: c.req.method, path: c.req.path }, "e2b request failed");
    return errorResponse(500, "internal error");
  });
  return app;
}
