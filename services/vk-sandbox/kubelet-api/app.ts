// The kubelet HTTP API the apiserver dials for this virtual node (§8.2), as a hono app that does not listen:
// tests call `app.request()`, `serve.ts` binds it over TLS.
//
// Router semantics follow the Go library's gorilla/mux with StrictSlash: a known path with the other slash form is
// redirected (301), a known path with another method is 405, and anything else is 404 `404 request not found`.
import type { V1Pod, V1PodList } from "@kubernetes/client-node";
import { Hono, type Context } from "hono";
import { containerLogsQueryError, streamQueryError } from "./query.ts";
import { badRequest, notImplemented, streamNotImplemented } from "./unsupported.ts";

export interface KubeletApiDeps {
  /** The pod cache: every Pod bound to this node, as the informer holds them. */
  listPods(): V1Pod[];
  /** The provider's pod table (`PodLifecycleProvider.getPods`). */
  runningPods(): V1Pod[];
  /** The daemon's own Prometheus exposition for `/metrics` (metrics.ts); absent: the route is not served. */
  metrics?(): Promise<{ body: string; contentType: string }>;
}

interface Route {
  path: string;
  methods: string[];
  handle(c: Context): Response | Promise<Response>;
}

/** What Go's empty stats Summary marshals to; monitoring tools parse it, so the shape matters more than content. */
export const EMPTY_SUMMARY = { node: { nodeName: "", startTime: null }, pods: null };

export const NOT_FOUND_BODY = "404 request not found";

function podList(items: V1Pod[]): V1PodList {
  return { apiVersion: "v1", kind: "PodList", metadata: {}, items };
}

const summary = (c: Context) => c.json(EMPTY_SUMMARY);
// Prometheus text exposition 0.0.4, empty: no per-container metrics exist for microVM Pods.
const resourceMetrics = () => new Response("", { status: 200, headers: { "Content-Type": "text/plain; version=0.0.4" } });

function streamRoute(c: Context): Response {
  const problem = streamQueryError(new URL(c.req.url).searchParams);
  return problem ? badRequest(problem) : streamNotImplemented();
}

function routes(deps: KubeletApiDeps): Route[] {
  return [
    { path: "/pods", methods: ["GET"], handle: (c) => c.json(podList(deps.listPods())) },
    { path: "/runningpods/", methods: ["GET"], handle: (c) => c.json(podList(deps.runningPods())) },
    {
      path: "/containerLogs/:namespace/:pod/:container",
      methods: ["GET"],
      handle(c) {
        const problem = containerLogsQueryError(new URL(c.req.url).searchParams);
        return problem ? badRequest(problem) : notImplemented(500);
      },
    },
    { path: "/exec/:namespace/:pod/:container", methods: ["GET", "POST"], handle: streamRoute },
    { path: "/attach/:namespace/:pod/:container", methods: ["GET", "POST"], handle: streamRoute },
    { path: "/portForward/:namespace/:pod", methods: ["GET", "POST"], handle: () => streamNotImplemented() },
    { path: "/stats/summary", methods: ["GET"], handle: summary },
    { path: "/stats/summary/", methods: ["GET"], handle: summary },
    { path: "/metrics/resource", methods: ["GET"], handle: resourceMetrics },
    { path: "/metrics/resource/", methods: ["GET"], handle: resourceMetrics },
    ...(deps.metrics ? [{ path: "/metrics", methods: ["GET"], handle: () => daemonMetrics(deps.metrics!) }] : []),
  ];
}

/** The daemon's own metrics (claims, releases, writes, queues, sandboxd and apiserver calls): beyond upstream. */
async function daemonMetrics(read: NonNullable<KubeletApiDeps["metrics"]>): Promise<Response> {
  const { body, contentType } = await read();
  return new Response(body, { status: 200, headers: { "Content-Type": contentType } });
}

function pattern(path: string): RegExp {
  const body = path.replace(/[.*+?^${}()|[\]\\]/g, "\\$&").replace(/:[A-Za-z]+/g, "[^/]+");
  return new RegExp(`^${body}$`);
}

export function createKubeletApp(deps: KubeletApiDeps): Hono {
  const table = routes(deps).map((r) => ({ ...r, re: pattern(r.path) }));
  const app = new Hono({ strict: true });
  for (const r of table) app.on(r.methods, r.path, (c) => r.handle(c));

  app.notFound((c) => {
    const url = new URL(c.req.url);
    const path = url.pathname;
    const same = table.filter((r) => r.re.test(path));
    if (same.length > 0) {
      const allow = [...new Set(same.flatMap((r) => r.methods))].join(", ");
      return new Response("", { status: 405, headers: { Allow: allow } });
    }
    const other = path.endsWith("/") ? path.slice(0, -1) : `${path}/`;
    if (other && table.some((r) => r.re.test(other))) {
      return new Response(null, { status: 301, headers: { Location: other + url.search } });
    }
    return new Response(NOT_FOUND_BODY, { status: 404, headers: { "Content-Type": "text/plain; charset=utf-8" } });
  });
  return app;
}
