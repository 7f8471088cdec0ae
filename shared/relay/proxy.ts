// The envd relay (docs/envd-relay.md): route -> envd-internal path guard -> credential choice -> owner
// resolution -> tunnel -> guest leg. It translates nothing, reveals no node name, address, claim id or token, and
// answers every failure with the `{code, message}` envelope. `/healthz` and `/metrics` answer only requests that
// name no sandbox (apex host, bare address, no E2b-Sandbox-Id), so a guest path of the same name stays reachable.
import type { Server } from "bun";
import type { Logger } from "../log/index.ts";
import type { FleetSource } from "../fleet/types.ts";
import { forwardHttp1, forwardHttp2, HOP_BY_HOP, type GuestRequest } from "./guest.ts";
import { RelayMetrics } from "./metrics.ts";
import { OwnerResolver, type Owner } from "./owners.ts";
import { isEnvdInternalPath, isSignedFileUrl, routeRequest, type Route } from "./route.ts";
import { openTunnel, TunnelRefused } from "./tunnel.ts";

export interface RelayOptions {
  domain: string;
  fleet: FleetSource;
  envdSecret: string;
  rootToken: string;
  /** Inventory lookups only; empty = all namespaces. */
  namespace: string;
  guestHttp2: boolean;
  log: Logger;
}

export function relayError(status: number, message: string): Response {
  return new Response(`${JSON.stringify({ code: status, message })}\n`, { status, headers: { "content-type": "application/json" } });
}

export class EnvdRelay {
  readonly metrics = new RelayMetrics();
  readonly owners: OwnerResolver;

  constructor(private readonly o: RelayOptions) {
    this.owners = new OwnerResolver({ fleet: o.fleet, envdSecret: o.envdSecret, rootToken: o.rootToken, namespace: o.namespace, log: o.log });
  }

  /** Forget a sandbox's owner at once (a kill through the in-process e2b surface). */
  dropOwner(claimId: string): void {
    this.owners.cache.drop(claimId);
  }

  /** Bun.serve's fetch handler. */
  fetch = async (req: Request, server: Server<unknown>): Promise<Response> => {
    const res = await this.handle(req, server);
    this.metrics.requests.inc({ code: String(res.status) });
    return res;
  };

  private async handle(req: Request, server: Server<unknown>): Promise<Response> {
    const url = new URL(req.url);
    const host = req.headers.get("host") ?? url.host;
    const routed = routeRequest(req.headers, host, this.o.domain);
    if (!routed.ok) {
      if (!routed.namesSandbox && (req.method === "GET" || req.method === "HEAD")) {
        if (url.pathname === "/healthz") return new Response(null, { status: 204 });
        if (url.pathname === "/metrics") return new Response(await this.metrics.registry.metrics(), { headers: { "content-type": this.metrics.registry.contentType } });
      }
      return relayError(400, "no sandbox in the request host or headers");
    }
    const route = routed.route;
    if (isEnvdInternalPath(url.pathname)) return relayError(404, "not found");

    const presented = (req.headers.get("x-access-token") ?? "").trim();
    const signed = presented === "" && isSignedFileUrl(route.port, req.method, url);
    if (presented === "" && !signed) return relayError(401, "missing X-Access-Token");

    const r = await this.owners.resolve(route.id, signed ? undefined : presented);
    if (r.kind === "bad-token") {
      this.metrics.lookups.inc({ result: "bad_token" });
      return relayError(401, "invalid sandbox access token");
    }
    if (r.kind === "unavailable") {
      this.metrics.lookups.inc({ result: "unavailable" });
      if (r.reason !== "unknown") this.o.log.warn({ reason: r.reason }, "sandbox owner not resolved");
      this.metrics.upstreamErrors.inc({ reason: "unavailable" });
      return relayError(502, "sandbox unavailable");
    }
    this.metrics.lookups.inc({ result: r.source });
    return this.relay(req, url, host, route, r.owner, signed, server);
  }

  private async relay(req: Request, url: URL, host: string, route: Route, owner: Owner, passive: boolean, server: Server<unknown>): Promise<Response> {
    const started = performance.now();
    let sock;
    try {
      sock = await openTunnel({ address: owner.address, claimId: owner.claimId, port: route.port, token: passive ? this.o.rootToken : owner.claimToken }, { signal: req.signal });
    } catch (err) {
      if (err instanceof TunnelRefused) {
        if (err.status === 404) {
          // Released within the cache TTL: forget it now, and answer as for an unknown sandbox so the SDK's
          // isRunning() reads false instead of an authentication error.
          this.owners.cache.drop(owner.claimId);
          this.metrics.upstreamErrors.inc({ reason: "refused" });
          return relayError(502, "sandbox unavailable");
        }
        if (err.status === 401) return relayError(401, "invalid sandbox access token");
        if (err.status === 400) return relayError(400, "unsupported sandbox port");
        if (err.status === 409) {
          this.metrics.upstreamErrors.inc({ reason: "paused" });
          return relayError(502, "sandbox is paused");
        }
      }
      this.metrics.upstreamErrors.inc({ reason: "unreachable" });
      return relayError(502, "sandbox unreachable");
    }
    this.metrics.openTunnels.inc();
    sock.once("close", () => this.metrics.openTunnels.dec());

    const headers: Record<string, string> = {};
    req.headers.forEach((v, k) => {
      if (HOP_BY_HOP.has(k) || k === "x-api-key" || k.startsWith(":")) return;
      headers[k] = v;
    });
    const clientIp = server.requestIP(req)?.address;
    if (clientIp) headers["x-forwarded-for"] = headers["x-forwarded-for"] ? `${headers["x-forwarded-for"]}, ${clientIp}` : clientIp;
    headers["x-forwarded-host"] = host;
    headers["x-forwarded-proto"] = url.protocol === "https:" ? "https" : "http";
    const g: GuestRequest = {
      method: req.method,
      path: url.pathname + url.search,
      authority: `${route.port}-${route.id}.${this.o.domain}`,
      headers,
      body: req.body,
      onBytesIn: (n) => this.metrics.bytes.inc({ direction: "in" }, n),
      onBytesOut: (n) => this.metrics.bytes.inc({ direction: "out" }, n),
      signal: req.signal,
    };
    try {
      const res = await (this.o.guestHttp2 ? forwardHttp2(sock, g) : forwardHttp1(sock, g));
      this.metrics.upstreamSeconds.observe((performance.now() - started) / 1000);
      return res;
    } catch (err) {
      sock.destroy();
      this.o.log.debug({ err: (err as Error).message }, "guest leg failed");
      this.metrics.upstreamErrors.inc({ reason: "guest" });
      return relayError(502, "sandbox unreachable");
    }
  }
}
