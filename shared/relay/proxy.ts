// The envd relay (docs/envd-relay.md): route -> envd-internal path guard -> credential choice -> owner
// resolution -> tunnel -> guest leg. It translates nothing, reveals no node name, address, claim id or token, and
// answers every failure with the `{code, message}` envelope. `/healthz` answers only requests that name no sandbox
// (apex host, bare address, no E2b-Sandbox-Id), so a guest path of the same name stays reachable; `/metrics` is
// served on its own listener (shared/http serveMetrics), never here.
// Every relay holds a slot (limits.ts: 429 per sandbox, client or namespace, 503 global; a request with no credential
// in public buckets of its own) from the dial until its tunnel closes, reports what it buffers to the global budget,
// gets a deadline on the guest's answer and a minimum rate on its request body (docs/envd-relay.md "Bounds").
import type { Server } from "bun";
import { publicSandboxId, trafficTokenMatches, type PublicTrafficPolicy } from "../envd-token/index.ts";
import { errorChain, type Logger } from "../log/index.ts";
import type { FleetSource } from "../fleet/index.ts";
import { forwardHttp2, guestRequestHeaders, type BodyEndListener, type GuestRequest } from "./guest.ts";
import { BunTunnel } from "./bun-tunnel.ts";
import { isFramingError } from "./framing/index.ts";
import { forwardHttp1Raw, startHttp1 } from "./h1.ts";
import { BufferBudget, BufferShare, ChunkPacer, DEFAULT_RELAY_LIMITS, RelaySlots, type RelayLimitOptions } from "./limits.ts";
import { RelayMetrics } from "./metrics.ts";
import { rateLimited, relayError, SANDBOX_WAKE_FAILED_MESSAGE, sandboxNotFound, sandboxPaused, unresolvedAnswer, wakeTimedOutAnswer } from "./answers.ts";
import { OwnerResolver, type Owner } from "./owners.ts";
import { FailedLookupTarpit, type TarpitOptions } from "./tarpit.ts";
import { envdPathVerdict, routeRequest, type Route } from "./route.ts";
import { credentialOf, servesPublicly, TRAFFIC_TOKEN_RE } from "./public-ports.ts";
import { isApiHost, type ApiHandler } from "./api-host.ts";
import { endpointOf, openTunnel, TunnelRefused, TunnelTimedOut } from "./tunnel.ts";
import { asleepInView } from "./asleep.ts";
import { guestHandshake, HandshakeTimeout, isWebSocketUpgrade, type WsRelayData } from "./websocket.ts";

export interface RelayOptions {
  domain: string;
  fleet: FleetSource;
  envdSecret: string;
  rootToken: string;
  /** Inventory lookups only; empty = all namespaces. */
  namespace: string;
  guestHttp2: boolean;
  log: Logger;
  /** Caps, budget and deadlines; each unset one takes DEFAULT_RELAY_LIMITS'. */
  limits?: Partial<RelayLimitOptions>;
  /** The failed-lookup tarpit's budget and delay (default DEFAULT_TARPIT). */
  tarpit?: TarpitOptions;
  /** Public user ports (public-ports.ts); unset: e2b cloud's (public unless the create said otherwise). */
  publicTraffic?: PublicTrafficPolicy;
  /** Serves api.{domain} (api-host.ts): the e2b app in process, or a relay to the apiserver's e2b Service. */
  api?: ApiHandler;
}

export { relayError } from "./answers.ts";

/** The listener's hook on a relayed body's end (idle.ts RequestIdle): the relay sets `awaitingBody` when it hands one on. */
export interface RelayedBodyEnd extends BodyEndListener {
  awaitingBody: boolean;
}

export class EnvdRelay {
  readonly limits: RelayLimitOptions;
  readonly slots: RelaySlots;
  readonly budget: BufferBudget;
  readonly metrics: RelayMetrics;
  readonly owners: OwnerResolver;
  /** Failed lookups past a per-address budget are answered late (tarpit.ts): a junk loop cannot take the thread. */
  readonly tarpit: FailedLookupTarpit;
  /** Chunked guest bodies decoded per second, per namespace (limits.ts ChunkPacer). */
  private readonly pacer: ChunkPacer;

  constructor(private readonly o: RelayOptions) {
    this.limits = { ...DEFAULT_RELAY_LIMITS, ...o.limits };
    this.pacer = new ChunkPacer(this.limits.chunkRatePerNamespace);
    this.slots = new RelaySlots(this.limits);
    this.budget = new BufferBudget(this.limits.bufferBytes);
    this.metrics = new RelayMetrics({ activeRelays: () => this.slots.active, bufferedBytes: () => this.budget.bytes, activePublicRelays: () => this.slots.activePublic });
    this.tarpit = new FailedLookupTarpit(o.tarpit);
    this.owners = new OwnerResolver({ fleet: o.fleet, envdSecret: o.envdSecret, rootToken: o.rootToken, namespace: o.namespace, log: o.log });
  }

  /** Know a sandbox's owner at once (a claim through the in-process e2b surface): its first request needs no read. */
  primeOwner(claimId: string, address: string, claimToken: string, namespace: string, publicTraffic?: boolean): void {
    this.owners.prime(claimId, address, claimToken, namespace, publicTraffic);
  }

  /** Forget a sandbox's owner at once (a kill through the in-process e2b surface). */
  dropOwner(claimId: string): void {
    this.owners.cache.drop(claimId);
  }

  /**
   * Bun.serve's fetch handler. Undefined: the request was upgraded to a relayed WebSocket. When a guest's body is
   * handed on, `bodyEnd.awaitingBody` is set and `bodyEnd.bodyEnded()` follows once the client has read all of it.
   */
  fetch = async (req: Request, server: Server<WsRelayData>, bodyEnd?: RelayedBodyEnd): Promise<Response | undefined> => {
    const res = await this.handle(req, server, bodyEnd);
    this.metrics.requests.inc({ code: res ? String(res.status) : "101" });
    return res;
  };

  private async handle(req: Request, server: Server<WsRelayData>, bodyEnd: RelayedBodyEnd | undefined): Promise<Response | undefined> {
    const url = new URL(req.url);
    const host = req.headers.get("host") ?? url.host;
    const client = server.requestIP(req)?.address;
    if (!req.headers.has("e2b-sandbox-id") && isApiHost(host, this.o.domain)) {
      if (this.o.api) return this.o.api(req, client);
      return relayError(404, `api.${this.o.domain} is not served by this proxy (sandbox-envd-proxy --e2b-api-upstream)`);
    }
    const routed = routeRequest(req.headers, host, this.o.domain);
    if (!routed.ok) {
      if (!routed.namesSandbox && (req.method === "GET" || req.method === "HEAD")) {
        if (url.pathname === "/healthz") return new Response(null, { status: 204 });
      }
      return this.refuse(400, "no sandbox in the request host or headers", client, req.signal);
    }
    const route = routed.route;
    const verdict = envdPathVerdict(url.pathname);
    if (verdict === "undecodable") return this.refuse(400, "request path has an invalid percent-encoding", client, req.signal);
    if (verdict === "internal") return this.refuse(404, "not found", client, req.signal);

    const cred = credentialOf(route.port, req.method, url, req.headers);
    if (cred.kind === "none" && cred.envdPort) return this.refuse(401, "missing X-Access-Token", client, req.signal);
    if (cred.kind === "traffic-token" && !TRAFFIC_TOKEN_RE.test(cred.token)) return this.refuse(401, "invalid traffic access token", client, req.signal);
    // Only the envd access token is checked by the resolver (and may probe); every other credential is judged
    // against the owner found in the cache or the fleet view.
    const r = await this.owners.resolve(route.id, cred.kind === "envd-token" ? cred.token : undefined, { client });
    if (r.kind === "bad-token") {
      this.metrics.lookups.inc({ result: "bad_token" });
      await this.tarpit.failed(client, req.signal);
      return relayError(401, "invalid sandbox access token");
    }
    if (r.kind === "unavailable") {
      this.metrics.lookups.inc({ result: "unavailable" });
      // Only "unknown" is the caller's doing (an id nobody holds, a shape never issued); the rest are ours.
      if (r.reason === "unknown") await this.tarpit.failed(client, req.signal);
      else this.o.log.warn({ reason: r.reason }, "sandbox owner not resolved");
      this.metrics.upstreamErrors.inc({ reason: "unavailable" });
      return unresolvedAnswer(r.reason);
    }
    this.metrics.lookups.inc({ result: r.source });
    if (cred.kind === "traffic-token" && !trafficTokenMatches(this.o.envdSecret, r.owner.claimToken, cred.token)) {
      return this.refuse(401, "invalid traffic access token", client, req.signal);
    }
    if (cred.kind === "none" && !servesPublicly(r.owner, this.o.publicTraffic)) {
      return this.refuse(401, "this sandbox's ports are not public: send its traffic access token in the e2b-traffic-access-token header", client, req.signal);
    }
    return this.relay(req, url, host, route, r.owner, { passive: cred.kind === "signed-url", publicRelay: cred.kind === "none" }, server, client, bodyEnd);
  }

  /**
   * An early refusal (no sandbox named, a path the guest must not get, no token) is a failed lookup too: a key holder
   * probing hosts or tokens in a loop is held by the same tarpit as one probing ids (tarpit.ts).
   */
  async refuse(status: number, message: string, client: string | undefined, signal: AbortSignal): Promise<Response> {
    await this.tarpit.failed(client, signal);
    return relayError(status, message);
  }

  private async relay(
    req: Request,
    url: URL,
    host: string,
    route: Route,
    owner: Owner,
    kind: { passive: boolean; publicRelay: boolean },
    server: Server<WsRelayData>,
    clientIp: string | undefined,
    bodyEnd: RelayedBodyEnd | undefined,
  ): Promise<Response | undefined> {
    const started = performance.now();
    const { passive } = kind;
    // A request with no credential (a public port) spends the public buckets, never the owner's (limits.ts).
    const slot = this.slots.acquire(owner.claimId, clientIp, owner.namespace, kind.publicRelay);
    if ("status" in slot) {
      this.metrics.refused.inc({ cap: slot.cap });
      return rateLimited(slot.status, slot.message);
    }
    // A plain-TCP node's HTTP/1.1 leg runs on a Bun socket (bun-tunnel.ts); TLS nodes, --guest-http2 and
    // WebSocket need a node:net socket.
    const onBun = !this.o.guestHttp2 && !endpointOf(owner.address).secure && !isWebSocketUpgrade(req);
    let sock: import("node:net").Socket | BunTunnel;
    // A sandbox the view shows asleep: this relay (with its token) is what wakes it; the node answers the Upgrade
    // once it runs, within --wake-timeout. Timed, and a failure says it was the wake (asleep.ts).
    const asleep = !passive && asleepInView(this.o.fleet.nodes(), owner.address, owner.claimId);
    try {
      const target = { address: owner.address, claimId: owner.claimId, port: route.port, token: passive ? this.o.rootToken : owner.claimToken };
      // Asleep: the node holds the Upgrade while it wakes the sandbox, so the handshake gets --wake-timeout.
      const dial = asleep ? { signal: req.signal, dialTimeoutMs: this.limits.wakeTimeoutMs } : { signal: req.signal };
      sock = onBun ? await BunTunnel.open(target, dial) : await openTunnel(target, dial);
      if (asleep) {
        this.metrics.wakeWaitSeconds.observe((performance.now() - started) / 1000);
        this.metrics.wakes.inc({ outcome: "ok" });
      }
    } catch (err) {
      slot.release();
      if (asleep && !req.signal.aborted && err instanceof TunnelTimedOut) {
        // The wake outlasted --wake-timeout: a 504 that says so. The node's wake goes on (a later request is served);
        // this request's slot is already freed, so a burst on a slow wake cannot hold the tenant's slots past the bound.
        this.metrics.wakes.inc({ outcome: "timeout" });
        this.metrics.upstreamErrors.inc({ reason: "wake" });
        this.o.log.warn({ address: owner.address, wakeTimeoutMs: this.limits.wakeTimeoutMs }, "a sleeping sandbox did not wake within --wake-timeout");
        return wakeTimedOutAnswer(req, this.limits.wakeTimeoutMs);
      }
      if (asleep && !req.signal.aborted && !(err instanceof TunnelRefused && [400, 401, 404, 429].includes(err.status))) {
        // The node could not resume it (its wake failed, a dial error): a 502 that says so.
        this.metrics.wakes.inc({ outcome: "failed" });
        this.metrics.upstreamErrors.inc({ reason: "wake" });
        this.o.log.warn({ address: owner.address, err: errorChain(err) }, "waking a sleeping sandbox through the ports relay failed");
        return relayError(502, SANDBOX_WAKE_FAILED_MESSAGE);
      }
      if (err instanceof TunnelRefused) {
        if (err.status === 404) {
          // Released within the cache TTL: forget it now, and answer as for an unknown sandbox so the SDK's
          // isRunning() reads false instead of an authentication error.
          this.owners.cache.drop(owner.claimId);
          this.metrics.upstreamErrors.inc({ reason: "refused" });
          return sandboxNotFound();
        }
        if (err.status === 401) return relayError(401, "invalid sandbox access token");
        if (err.status === 400) return relayError(400, "unsupported sandbox port");
        // The node's own relay cap: the client's rate-limit error, with Retry-After, not an unreachable sandbox.
        if (err.status === 429) return rateLimited(429, "the sandbox's node is busy; retry later");
        // A passive relay may not wake a paused sandbox: e2b cloud's 409. An active one wakes it, so its 409 is a
        // sandbox that cannot run (failed, being archived): unreachable, as before.
        if (err.status === 409 && passive) {
          this.metrics.upstreamErrors.inc({ reason: "paused" });
          return sandboxPaused();
        }
      }
      this.metrics.upstreamErrors.inc({ reason: "unreachable" });
      // The client sees only 502; the log names the node and why (TLS verification, refused, timed out).
      this.o.log.warn({ address: owner.address, err: errorChain(err) }, "ports relay to the node failed");
      return relayError(502, "sandbox unreachable");
    }
    this.metrics.openTunnels.inc();
    const share = new BufferShare(this.budget);
    let stopBodyWatch = () => {};
    const closed = () => {
      this.metrics.openTunnels.dec();
      share.release();
      slot.release();
      stopBodyWatch();
    };
    if (sock instanceof BunTunnel) {
      sock.onClose(closed);
      sock.gate = () => share.mayRead();
    } else sock.once("close", closed);

    const headers = guestRequestHeaders(req.headers);
    if (clientIp) headers["x-forwarded-for"] = headers["x-forwarded-for"] ? `${headers["x-forwarded-for"]}, ${clientIp}` : clientIp;
    headers["x-forwarded-host"] = host;
    headers["x-forwarded-proto"] = url.protocol === "https:" ? "https" : "http";
    if (!(sock instanceof BunTunnel) && isWebSocketUpgrade(req)) return this.relayWebSocket(req, url, route, headers, sock, share, server);
    const wire = sock;
    let sent = 0;
    // Set when the body fell under the minimum rate: the tunnel was dropped for it (answered 408 before the head).
    let slowBody: SlowBody | undefined;
    const g: GuestRequest = {
      method: req.method,
      path: url.pathname + url.search,
      authority: `${route.port}-${route.id}.${this.o.domain}`,
      headers,
      body: req.body,
      onBytesIn: (n) => {
        sent += n;
        this.metrics.bytes.inc({ direction: "in" }, n);
      },
      onBytesOut: (n) => this.metrics.bytes.inc({ direction: "out" }, n),
      // The h2 leg pauses its own stream on false; an HTTP/1.1 leg's wire is paused here (its next pull resumes it).
      queued: this.o.guestHttp2 ? (n) => share.set(n) : (n) => share.set(n) || (wire.pause(), false),
      mayRead: () => share.mayRead(),
      signal: req.signal,
      onBodyFramingError: (err) => this.framingError("body", owner, route, err),
      bodyEnd,
      onBodySent: () => stopBodyWatch(),
      // A public port's anonymous clients spend a budget of that sandbox's own, never its owner's (as with slots).
      pace: (chunks) => {
        const wait = this.pacer.take(kind.publicRelay ? `public/${owner.claimId}` : owner.namespace, chunks);
        if (wait > 0) this.metrics.pacedReads.inc();
        return wait;
      },
    };
    if (req.body !== null && this.limits.requestBodyMinRate > 0) {
      stopBodyWatch = watchBodyRate(this.limits.requestBodyMinRate, this.limits.requestBodyRateWindowMs, () => sent, (err) => {
        slowBody = err;
        this.metrics.slowBodies.inc();
        sock.destroy();
      });
    }
    try {
      const forwarded = sock instanceof BunTunnel ? forwardOverBunTunnel(sock, g) : this.o.guestHttp2 ? forwardHttp2(sock, g) : forwardHttp1Raw(sock, g);
      const res = await headDeadline(forwarded, this.limits.guestHandshakeMs, () => sent, () => sock.destroy());
      this.metrics.upstreamSeconds.observe((performance.now() - started) / 1000);
      if (bodyEnd && res.body !== null) bodyEnd.awaitingBody = true;
      return res;
    } catch (err) {
      sock.destroy();
      if (err instanceof HandshakeTimeout) {
        this.metrics.upstreamErrors.inc({ reason: "timeout" });
        return relayError(504, "the sandbox did not answer in time");
      }
      if (slowBody) return relayError(408, slowBody.message);
      if (isFramingError(err)) this.framingError("head", owner, route, err);
      else this.o.log.debug({ err: (err as Error).message }, "guest leg failed");
      this.metrics.upstreamErrors.inc({ reason: "guest" });
      return relayError(502, "sandbox unreachable");
    }
  }

  /**
   * A guest reply that broke HTTP/1.1 framing (before the head: answered 502; after it: the download fails): counted,
   * and one warn line per exchange naming the sandbox and the violation (never a token or a header value).
   */
  private framingError(phase: "head" | "body", owner: Owner, route: Route, err: Error): void {
    this.metrics.framingErrors.inc({ phase });
    this.o.log.warn({ sandbox: publicSandboxId(owner.claimId), port: route.port, phase, err: err.message }, "guest broke the response framing");
  }

  /** Handshake with the guest first; only a guest 101 upgrades the client (else the guest's status is answered). */
  private async relayWebSocket(
    req: Request,
    url: URL,
    route: Route,
    headers: Record<string, string>,
    sock: import("node:net").Socket,
    share: BufferShare,
    server: Server<WsRelayData>,
  ): Promise<Response | undefined> {
    const toGuest: Record<string, string> = {};
    for (const [k, v] of Object.entries(headers)) {
      // Key, version and extensions belong to each leg's own handshake; permessage-deflate is not negotiated.
      if (k === "sec-websocket-key" || k === "sec-websocket-version" || k === "sec-websocket-extensions") continue;
      toGuest[k] = v;
    }
    toGuest.host = `${route.port}-${route.id}.${this.o.domain}`;
    let shake;
    try {
      shake = await guestHandshake(sock, url.pathname + url.search, toGuest, { timeoutMs: this.limits.guestHandshakeMs, signal: req.signal });
    } catch (err) {
      sock.destroy();
      if (err instanceof HandshakeTimeout) {
        this.metrics.upstreamErrors.inc({ reason: "timeout" });
        return relayError(504, "the sandbox did not answer the WebSocket upgrade in time");
      }
      const status = (err as { status?: number }).status;
      // Only a status a Response can carry is passed on (99, 600 or a 1xx other than 101 would throw): else 502.
      if (status && Number.isInteger(status) && status >= 200 && status <= 599) return relayError(status, `the guest refused the WebSocket upgrade (${status})`);
      return relayError(502, "sandbox unreachable");
    }
    const upgraded = server.upgrade(req, {
      data: { sock, pending: Buffer.from(shake.rest), share, onClose: () => undefined },
      ...(shake.protocol ? { headers: { "sec-websocket-protocol": shake.protocol } } : {}),
    });
    if (!upgraded) {
      sock.destroy();
      return relayError(400, "WebSocket upgrade needs HTTP/1.1");
    }
    return undefined;
  }
}

function forwardOverBunTunnel(t: BunTunnel, g: GuestRequest): Promise<Response> {
  const { response, events } = startHttp1(t, g);
  t.attach(events);
  return response;
}

/** The request body arrived slower than the minimum rate. */
class SlowBody extends Error {}

/**
 * While a request body arrives it must bring `minRate` bytes per second over each window of `windowMs`, before the
 * guest's head and after it alike; slower, `fail` drops the tunnel (before the head the client is answered 408,
 * after it its exchange ends). Without it, progress alone re-armed the head deadline and the listener's idle timeout
 * is off while a request is served, so a body dripped a byte at a time held its relay slot forever (issue 27).
 * Returns the stop, called when the body's last byte went to the guest or the tunnel closed.
 */
function watchBodyRate(minRate: number, windowMs: number, progress: () => number, fail: (err: SlowBody) => void): () => void {
  const need = Math.ceil((minRate * windowMs) / 1000);
  let mark = progress();
  const timer = setInterval(() => {
    const now = progress();
    if (now - mark >= need) {
      mark = now;
      return;
    }
    clearInterval(timer);
    fail(new SlowBody(`the request body arrived slower than ${minRate} bytes/s (${now - mark} bytes in ${windowMs / 1000} s)`));
  }, windowMs);
  return () => clearInterval(timer);
}

/**
 * The guest's response head must come within `ms` of the last request-body progress (an upload's head only comes
 * after its body): past it the tunnel is dropped and the caller answers 504.
 */
function headDeadline(p: Promise<Response>, ms: number, progress: () => number, drop: () => void): Promise<Response> {
  return new Promise<Response>((resolve, reject) => {
    let seen = progress();
    let timer: ReturnType<typeof setTimeout>;
    const arm = () => {
      timer = setTimeout(() => {
        const now = progress();
        if (now !== seen) {
          seen = now;
          return arm();
        }
        reject(new HandshakeTimeout(`the guest sent no response head within ${ms} ms`));
        drop();
      }, ms);
    };
    arm();
    p.then(
      (r) => {
        clearTimeout(timer);
        resolve(r);
      },
      (e: unknown) => {
        clearTimeout(timer);
        reject(e);
      },
    );
  });
}
