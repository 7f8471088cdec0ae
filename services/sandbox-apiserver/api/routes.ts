// The agents.x-k8s.io/v1beta1 routes (docs/api.md): discovery, OpenAPI, and the sandboxes resource with its
// lifecycle subresources. Handlers throw ApiError; onError renders every failure as a Kubernetes Status.
import { Hono } from "hono";
import type { Logger } from "pino";
import type { Clock } from "#shared/clock/index.ts";
import { type CreateDeps, createSandbox } from "../sandboxes/index.ts";
import { type SubresourceReview, type Verb, deleteSandbox, runVerb, setOperatingMode } from "../sandboxes/index.ts";
import { GROUP, type Sandbox, VERSION } from "../sandboxes/index.ts";
import type { Caller, PodGuard, SandboxChanges, SandboxReader } from "../sandboxes/index.ts";
import {
  AGGREGATED_DISCOVERY_V2,
  aggregatedDiscovery,
  apiGroup,
  apiGroupList,
  apiResourceList,
  wantsAggregatedDiscovery,
} from "./discovery.ts";
import { openapiV2, openapiV3, openapiV3Root } from "./openapi.ts";
import { listResponse, tableResponse } from "./list-body.ts";
import { SelectorError, parseFieldSelector, parseLabelSelector } from "./selectors.ts";
import { ApiError, badRequest, internal, isApiError, methodNotAllowed, notFound, statusResponse } from "./status.ts";
import { tableRequest, toTable } from "./table.ts";
import { decodeSandbox, fieldValidationOf } from "./validate.ts";
import { watchStream } from "./watch.ts";

export interface ApiDeps {
  reader: SandboxReader;
  /** The fleet's sandbox changes, computed once per inventory event for every open watch. */
  changes: SandboxChanges;
  create: CreateDeps;
  /** Mutations of a Pod-backed sandbox also need the pod permission (sandboxes/pod-guard.ts). */
  podGuard: PodGuard;
  /** Reviews `create sandboxes/pause|resume` for a spec.operatingMode change; absent: only system:masters may. */
  subresourceReview?: SubresourceReview;
  clock: Clock;
  log?: Logger;
  shutdown: AbortSignal;
  /** The /version document (the build identity). */
  version: () => object;
}

const BASE = `/apis/${GROUP}/${VERSION}`;
const VERBS = new Set<Verb>(["pause", "resume", "fork", "snapshot"]);
const DRY_RUN = "dry-run is not supported for sandbox mutations";
const JSON_HEADERS = { "content-type": "application/json" };

function rejectDryRun(q: URLSearchParams, name?: string): void {
  if (q.getAll("dryRun").some((v) => v !== "")) throw badRequest(DRY_RUN, name);
}

function selectors(q: URLSearchParams) {
  try {
    return { labels: parseLabelSelector(q.get("labelSelector") ?? undefined), fields: parseFieldSelector(q.get("fieldSelector") ?? undefined) };
  } catch (e) {
    if (e instanceof SelectorError) throw badRequest(e.message);
    throw e;
  }
}

/** What the serving layer hands each request: the authenticated caller (app.ts). */
export interface ApiBindings {
  caller?: Caller;
}
export type ApiApp = Hono<{ Bindings: ApiBindings }>;

export function apiRoutes(deps: ApiDeps): ApiApp {
  const app = new Hono<{ Bindings: ApiBindings }>();
  const mut = { reader: deps.reader, clients: deps.create.clients, podGuard: deps.podGuard, ...(deps.subresourceReview ? { subresourceReview: deps.subresourceReview } : {}) };

  app.onError((err) => {
    if (isApiError(err)) return statusResponse(err);
    deps.log?.error({ err: err.message }, "unhandled error in the aggregated API");
    return statusResponse(internal(err.message));
  });
  app.notFound((c) => statusResponse(new ApiError(404, `the server could not find the requested resource (${c.req.method} ${c.req.path})`, "NotFound")));

  app.get("/apis", (c) => {
    if (wantsAggregatedDiscovery(c.req.header("accept"))) {
      return new Response(JSON.stringify(aggregatedDiscovery()), { headers: { "content-type": AGGREGATED_DISCOVERY_V2 } });
    }
    return c.json(apiGroupList());
  });
  app.get(`/apis/${GROUP}`, (c) => c.json(apiGroup()));
  app.get(BASE, (c) => c.json(apiResourceList()));
  app.get("/version", (c) => c.json(deps.version()));
  app.get("/openapi/v2", (c) => c.json(openapiV2()));
  app.get("/openapi/v3", (c) => c.json(openapiV3Root()));
  app.get(`/openapi/v3/apis/${GROUP}/${VERSION}`, (c) => c.json(openapiV3()));

  const listOrWatch = async (req: Request, namespace: string | undefined): Promise<Response> => {
    const q = new URL(req.url).searchParams;
    const { labels, fields } = selectors(q);
    const table = tableRequest(req.headers.get("accept") ?? undefined, q, deps.clock);
    const watch = q.get("watch") === "true" || q.get("watch") === "1";
    if (watch) {
      const t = q.get("timeoutSeconds");
      const timeoutMs = t !== null && /^\d+$/.test(t) && Number(t) > 0 ? Number(t) * 1000 : undefined;
      const stream = watchStream(
        { reader: deps.reader, changes: deps.changes, clock: deps.clock, log: deps.log, shutdown: deps.shutdown },
        { namespace, labels, fields, table, sendInitialEvents: q.get("sendInitialEvents") === "true", ...(timeoutMs ? { timeoutMs } : {}) },
        req.signal,
      );
      return new Response(stream, { headers: { "content-type": "application/json", "cache-control": "no-cache, private" } });
    }
    let items: readonly Sandbox[];
    const matches = (s: Sandbox) => labels.matches(s.metadata.labels) && fields.matches(s);
    if (namespace !== undefined && fields.exactName !== undefined) {
      // Pinned list: resolve like a Get (live lookups included); if that object fails the selectors, scan for one that passes.
      const hit = await deps.reader.resolve(namespace, fields.exactName);
      items = hit && matches(hit.sandbox) ? [hit.sandbox] : deps.reader.list(namespace).filter(matches);
    } else {
      items = deps.reader.list(namespace).filter(matches);
    }
    return table ? tableResponse(items, table) : listResponse(items);
  };

  app.get(`${BASE}/sandboxes`, (c) => listOrWatch(c.req.raw, undefined));
  app.get(`${BASE}/namespaces/:ns/sandboxes`, (c) => listOrWatch(c.req.raw, c.req.param("ns")));

  app.post(`${BASE}/namespaces/:ns/sandboxes`, async (c) => {
    const q = new URL(c.req.url).searchParams;
    rejectDryRun(q);
    const validation = fieldValidationOf(q.get("fieldValidation"));
    const { sandbox, warnings } = decodeSandbox(await c.req.text(), c.req.param("ns"), validation);
    const created = await createSandbox(deps.create, c.req.param("ns"), sandbox);
    const headers: [string, string][] = [["content-type", "application/json"]];
    for (const w of warnings) headers.push(["warning", `299 - "${w}"`]);
    const table = tableRequest(c.req.header("accept"), q, deps.clock);
    return new Response(JSON.stringify(table ? toTable([created], table) : created), { status: 201, headers });
  });
  app.delete(`${BASE}/namespaces/:ns/sandboxes`, () => {
    throw methodNotAllowed("deletecollection");
  });

  const item = `${BASE}/namespaces/:ns/sandboxes/:name`;
  app.get(item, async (c) => {
    const { ns, name } = c.req.param();
    const hit = await deps.reader.resolve(ns, name);
    if (!hit) throw notFound(name);
    const table = tableRequest(c.req.header("accept"), new URL(c.req.url).searchParams, deps.clock);
    return Response.json(table ? toTable([hit.sandbox], table) : hit.sandbox);
  });
  app.delete(item, async (c) => {
    const { ns, name } = c.req.param();
    rejectDryRun(new URL(c.req.url).searchParams, name);
    // A DeleteOptions body may carry dryRun too.
    const body = await c.req.text();
    if (body) {
      let opts: { dryRun?: unknown } = {};
      try {
        opts = JSON.parse(body) as { dryRun?: unknown };
      } catch {
        throw badRequest("the DeleteOptions body is not valid JSON", name);
      }
      if (Array.isArray(opts.dryRun) && opts.dryRun.length > 0) throw badRequest(DRY_RUN, name);
    }
    return c.json(await deleteSandbox(mut, c.env?.caller, ns, name));
  });
  // Update and patch: spec.operatingMode only (sandboxes/operating-mode.ts): Suspended pauses, Running resumes.
  for (const method of ["put", "patch"] as const) {
    app[method](item, async (c) => {
      const { ns, name } = c.req.param();
      rejectDryRun(new URL(c.req.url).searchParams, name);
      const contentType = method === "patch" ? (c.req.header("content-type") ?? "") : undefined;
      return c.json(await setOperatingMode(mut, c.env?.caller, ns, name, contentType, await c.req.text()));
    });
  }

  app.post(`${item}/:verb`, async (c) => {
    const { ns, name, verb } = c.req.param();
    if (!VERBS.has(verb as Verb)) throw notFound(`${name}/${verb}`);
    rejectDryRun(new URL(c.req.url).searchParams, name);
    const text = await c.req.text();
    let body: Record<string, unknown> = {};
    if (text.trim()) {
      try {
        const v = JSON.parse(text) as unknown;
        if (v === null || typeof v !== "object" || Array.isArray(v)) throw new Error("not an object");
        body = v as Record<string, unknown>;
      } catch (e) {
        throw badRequest(`the ${verb} options are not a JSON object: ${(e as Error).message}`, name);
      }
    }
    return new Response(JSON.stringify(await runVerb(mut, c.env?.caller, ns, name, verb as Verb, body)), { status: 201, headers: JSON_HEADERS });
  });
  app.on(["GET", "PUT", "PATCH", "DELETE"], `${item}/:verb`, (c) => {
    if (!VERBS.has(c.req.param("verb") as Verb)) throw notFound(`${c.req.param("name")}/${c.req.param("verb")}`);
    throw methodNotAllowed(`${c.req.method} on sandboxes/${c.req.param("verb")}`, c.req.param("name"));
  });
  return app;
}
