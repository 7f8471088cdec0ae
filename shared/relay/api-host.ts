// `api.{domain}` on the proxy's listener (issue 20 part 6, docs/envd-relay.md "The SDKs' own URL scheme"): the
// SDKs' only scheme left is https://api.{domain} for the REST API and https://{port}-{id}.{domain} for sandboxes,
// so one wildcard name and certificate must serve both. sandbox-e2b hands such a request to its e2b app in process;
// sandbox-envd-proxy relays it to the apiserver's e2b Service (--e2b-api-upstream). Nothing else is routed here.
import { connectionOptions, HOP_BY_HOP } from "./guest.ts";
import { hostWithoutPort } from "./route.ts";

/** Serves a request for api.{domain}. */
export type ApiHandler = (req: Request, clientIp: string | undefined) => Promise<Response>;

/** Whether `host` (with or without a port) is exactly `api.{domain}`. */
export function isApiHost(host: string, domain: string): boolean {
  // Asked on every relayed request with the proxy's one domain: its normal form is kept, not rebuilt each time.
  if (domain !== lastDomain) {
    const d = domain.trim().toLowerCase().replace(/^\.+|\.+$/g, "");
    lastApiHost = d === "" ? "" : `api.${d}`;
    lastDomain = domain;
  }
  return lastApiHost !== "" && hostWithoutPort(host) === lastApiHost;
}
let lastDomain: string | undefined;
let lastApiHost = "";

/** How long the upstream may take for a whole exchange (a cold create waits on a node's claim: seconds, not minutes). */
export const API_UPSTREAM_TIMEOUT_MS = 120_000;

function upstreamHeaders(req: Request, clientIp: string | undefined): Headers {
  const named = connectionOptions(req.headers.get("connection"));
  const out = new Headers();
  req.headers.forEach((v, k) => {
    // The API key is for the upstream (it authenticates the tenant there), so it goes; hop-by-hop ones do not.
    if (HOP_BY_HOP.has(k) || named.has(k) || k.startsWith(":")) return;
    out.set(k, v);
  });
  const host = req.headers.get("host") ?? new URL(req.url).host;
  if (clientIp) out.set("x-forwarded-for", out.has("x-forwarded-for") ? `${out.get("x-forwarded-for")}, ${clientIp}` : clientIp);
  out.set("x-forwarded-host", host);
  out.set("x-forwarded-proto", new URL(req.url).protocol === "https:" ? "https" : "http");
  return out;
}

/**
 * Relays to `base` (http(s)://host[:port], no path): method, path, query, headers and a streamed body as sent; the
 * reply streamed back as the upstream sent it (never decompressed here). An unreachable upstream is a 502 envelope.
 */
export function upstreamApi(base: string, onError: (err: unknown) => void, timeoutMs = API_UPSTREAM_TIMEOUT_MS): ApiHandler {
  const origin = base.replace(/\/+$/, "");
  return async (req, clientIp) => {
    const url = new URL(req.url);
    const hasBody = req.method !== "GET" && req.method !== "HEAD" && req.body !== null;
    try {
      const res = await fetch(`${origin}${url.pathname}${url.search}`, {
        method: req.method,
        headers: upstreamHeaders(req, clientIp),
        ...(hasBody ? { body: req.body, duplex: "half" } : {}),
        redirect: "manual",
        decompress: false,
        signal: AbortSignal.any([req.signal, AbortSignal.timeout(timeoutMs)]),
      } as RequestInit);
      const headers = new Headers();
      const named = connectionOptions(res.headers.get("connection"));
      res.headers.forEach((v, k) => {
        if (!HOP_BY_HOP.has(k) && !named.has(k)) headers.append(k, v);
      });
      return new Response(res.body, { status: res.status, statusText: res.statusText, headers });
    } catch (err) {
      onError(err);
      return new Response(`${JSON.stringify({ code: 502, message: "the e2b API upstream is unreachable" })}\n`, { status: 502, headers: { "content-type": "application/json" } });
    }
  };
}
