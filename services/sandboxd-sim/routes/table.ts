// sandboxd-sim — development substrate standing in for sandboxd (which needs KVM). Not product code.
//
// Every route the simulator serves (sandboxd.md §7 item 1), by name. The names are what the fault knobs take
// (`fail("claim", 500)`, `latency("list", 200)`, "*" for all). The HTTP layer matches here first so that a router
// miss answers like Go's ServeMux: unknown path -> 404 "404 page not found", known path with another method ->
// 405 "Method Not Allowed" with an Allow header, both in plain text.

export const ROUTES = [
  { name: "claim", method: "POST", path: "/v1/claim" },
  { name: "list", method: "GET", path: "/v1/sandboxes" },
  { name: "get", method: "GET", path: "/v1/sandboxes/:id" },
  { name: "stats", method: "GET", path: "/v1/sandboxes/:id/stats" },
  { name: "owner", method: "GET", path: "/v1/sandboxes/:id/owner" },
  { name: "release", method: "POST", path: "/v1/sandboxes/:id/release" },
  { name: "renew", method: "POST", path: "/v1/sandboxes/:id/renew" },
  { name: "hibernate", method: "POST", path: "/v1/sandboxes/:id/hibernate" },
  { name: "wake", method: "POST", path: "/v1/sandboxes/:id/wake" },
  { name: "fork", method: "POST", path: "/v1/sandboxes/:id/fork" },
  { name: "promote", method: "POST", path: "/v1/sandboxes/:id/promote" },
  { name: "checkpoint", method: "POST", path: "/v1/sandboxes/:id/checkpoint" },
  { name: "ports", method: "GET", path: "/v1/sandboxes/:id/ports/:port" },
  { name: "agent", method: "GET", path: "/v1/sandboxes/:id/agent" },
  { name: "exec", method: "POST", path: "/v1/sandboxes/:id/exec" },
  { name: "preview", method: "POST", path: "/v1/sandboxes/:id/preview" },
  { name: "instance-metadata", method: "PUT", path: "/v1/sandboxes/:id/instance-metadata" },
  { name: "checkpoints", method: "GET", path: "/v1/checkpoints" },
  { name: "checkpoint-claim", method: "POST", path: "/v1/checkpoints/:id/claim" },
  { name: "checkpoint-delete", method: "DELETE", path: "/v1/checkpoints/:id" },
  { name: "template-delete", method: "DELETE", path: "/v1/templates" },
  { name: "template-labels", method: "PUT", path: "/v1/templates/labels" },
  { name: "info", method: "GET", path: "/v1/info" },
  { name: "pools", method: "PUT", path: "/v1/pools" },
  { name: "drain", method: "POST", path: "/v1/drain" },
  { name: "undrain", method: "DELETE", path: "/v1/drain" },
  { name: "peers", method: "GET", path: "/v1/peers" },
  { name: "metrics", method: "GET", path: "/metrics" },
  { name: "healthz", method: "GET", path: "/healthz" },
] as const;

export type RouteName = (typeof ROUTES)[number]["name"];
export const ROUTE_NAMES: readonly RouteName[] = ROUTES.map((r) => r.name);

const compiled = ROUTES.map((r) => ({
  ...r,
  re: new RegExp(`^${r.path.replace(/:[a-z]+/g, "([^/]+)")}$`),
}));

export type RouteMatch = { kind: "route"; name: RouteName } | { kind: "method"; allow: string[] } | { kind: "none" };

export function matchRoute(method: string, path: string): RouteMatch {
  const m = method === "HEAD" ? "GET" : method;
  const allow: string[] = [];
  for (const r of compiled) {
    if (!r.re.test(path)) continue;
    if (r.method === m) return { kind: "route", name: r.name };
    allow.push(r.method);
  }
  return allow.length ? { kind: "method", allow } : { kind: "none" };
}

/** Go's ServeMux bodies for router misses: plain text, not JSON. */
export function routerMiss(m: RouteMatch): Response {
  if (m.kind === "method") {
    return new Response("Method Not Allowed\n", {
      status: 405,
      headers: { "content-type": "text/plain; charset=utf-8", allow: m.allow.join(", "), "x-content-type-options": "nosniff" },
    });
  }
  return new Response("404 page not found\n", { status: 404, headers: { "content-type": "text/plain; charset=utf-8", "x-content-type-options": "nosniff" } });
}
