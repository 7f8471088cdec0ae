// createApp: the request path of the secure port, without listening (docs/architecture.md):
//   peer cert + headers → authenticate (401) → strip identity headers → authorize (403) → route → metrics.
// Always-allow paths (probes) skip authentication and authorization, so an anonymous kubelet gets its answer.
import type { Hono } from "hono";
import type { Logger } from "pino";
import { type ApiBindings, ApiError, MAX_REQUEST_BODY_BYTES, statusResponse } from "./api/index.ts";
import { type Authenticator, identityHeaderNames } from "./serving/index.ts";
import type { Authorizer } from "./serving/index.ts";
import type { PeerCert } from "./serving/index.ts";
import type { ApiserverMetrics } from "./serving/index.ts";
import { type RequestInfo, forbiddenMessage, readBody, requestInfo } from "./serving/index.ts";
import { type Caller, GROUP, VERSION } from "./sandboxes/index.ts";

export interface AppDeps {
  authenticator: Authenticator;
  authorizer: Authorizer;
  /** The aggregated API; each request gets the authenticated caller as its env (Pod-backed sandboxes need it). */
  api: { fetch(req: Request, env?: ApiBindings): Response | Promise<Response> };
  observability: Hono;
  metrics: ApiserverMetrics;
  log: Logger;
  /** Largest request body read (default MAX_REQUEST_BODY_BYTES); a larger one is a 413. */
  maxBodyBytes?: number;
}

const OBSERVABILITY = /^\/(healthz|livez|readyz|metrics)(\/|$)|^\/debug\/pprof(\/|$)/;

export function createApp(d: AppDeps): (req: Request, peer: PeerCert | undefined) => Promise<Response> {
  return async (req, peer) => {
    const started = performance.now();
    let url: URL | undefined;
    let info: RequestInfo | undefined;
    let res: Response;
    try {
      url = new URL(req.url);
      info = requestInfo(req.method, url);
      res = await handle(d, req, url, info, peer);
    } catch (e) {
      if (e instanceof ApiError) res = statusResponse(e);
      else {
        d.log.error({ err: (e as Error).message, path: url?.pathname }, "request failed");
        res = statusResponse(new ApiError(500, `Internal error occurred: ${(e as Error).message}`));
      }
    }
    const labels =
      info?.kind === "resource"
        ? {
            verb: info.verb.toUpperCase(),
            group: GROUP,
            version: VERSION,
            resource: info.resource,
            subresource: info.subresource,
            scope: info.name ? "resource" : info.namespace ? "namespace" : "cluster",
          }
        : { verb: req.method, group: "", version: "", resource: "", subresource: "", scope: "" };
    d.metrics.requests.inc({ ...labels, code: String(res.status) });
    d.metrics.latency.observe(labels, (performance.now() - started) / 1000);
    return res;
  };
}

async function handle(d: AppDeps, req: Request, url: URL, info: RequestInfo, peer: PeerCert | undefined): Promise<Response> {
  const route = (r: Request, caller?: Caller) => (OBSERVABILITY.test(url.pathname) ? d.observability.fetch(r) : d.api.fetch(r, { caller }));
  if (d.authorizer.alwaysAllowed(url.pathname)) return route(req);

  const authn = await d.authenticator.authenticate(req.headers, peer);
  if (!authn.ok) {
    d.log.debug({ path: url.pathname, reason: authn.message }, "authentication failed");
    return statusResponse(new ApiError(401, "Unauthorized", "Unauthorized"));
  }
  const headers = new Headers(req.headers);
  for (const h of identityHeaderNames(d.authenticator.requestHeaderConfig, headers)) headers.delete(h);
  headers.delete("authorization");

  const decision = await d.authorizer.authorize(authn.user, info);
  if (!decision.allowed) {
    const name = info.kind === "resource" ? info.name : undefined;
    return statusResponse(new ApiError(403, forbiddenMessage(authn.user.name, info, decision.error ? decision.reason : undefined), "Forbidden", name || undefined));
  }
  // A fresh Request without the identity headers. The body is read once natively (bodies here are small JSON
  // documents): `new Request(req, …)` re-wrapped the original body stream in a JS stream on every request.
  const body = req.method === "GET" || req.method === "HEAD" ? undefined : await readBody(req, d.maxBodyBytes ?? MAX_REQUEST_BODY_BYTES);
  return route(new Request(req.url, { method: req.method, headers, body, signal: req.signal }), authn.user);
}
