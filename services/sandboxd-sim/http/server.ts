// sandboxd-sim — development substrate standing in for sandboxd (which needs KVM). Not product code.
//
// The listener of one simulated node. It is node:http rather than Bun.serve because the ports relay needs the raw
// socket after `101 Switching Protocols` for an arbitrary `Upgrade: tcp`, which Bun.serve cannot hand over (it
// upgrades only to WebSocket); node:http's 'upgrade' event under Bun 1.4.5 gives the socket and works (measured).
// Routing stays in Hono: each request becomes a fetch Request for app.fetch(), with the already-read body passed
// as a binding (read once, capped at 1 MiB + 1 byte so an oversize body is detected without buffering it all).
//
// Per request: a target that makes no URL (bad Host, asterisk form, bad escape) or CONNECT -> 400/405 {error} |
// admin (/_sim/*, unlogged, fault-free) | route match (plain-text 404/405 on a miss) -> request log ->
// queued fault taken -> latency -> listFails / the fault -> Hono -> hang-after / reset-after? -> reply.
import http from "node:http";
import type { Duplex } from "node:stream";
import type { Hono } from "hono";
import { requestTargetProblem, type TargetProblem } from "#shared/http/index.ts";
import { bearerOf, type AuthKind } from "../auth.ts";
import { simErrorResponse } from "../errors.ts";
import type { SimNode } from "../node.ts";
import { MAX_REQUEST_BODY_BYTES } from "#shared/sandboxd/index.ts";
import { matchRoute, routerMiss, type RouteName } from "../routes/index.ts";
import { RELAY_HOLD, RELAY_MARKER, RELAY_PROTOCOL } from "../routes/index.ts";
import type { RawRequest, SimEnv } from "../routes/index.ts";
import type { Faults } from "./faults.ts";
import { decodeLoggedBody, type RequestLog, type RequestLogEntry } from "./reqlog.ts";
import { writeRawResponse } from "./raw.ts";
import { spliceToGuest } from "./relay.ts";

export interface NodeServerDeps {
  node: SimNode;
  app: Hono<SimEnv>;
  faults: Faults;
  log: RequestLog;
  /** Serves /_sim/* on this listener when set. */
  admin?: (req: Request) => Promise<Response>;
}

/** Where a reply goes: a ServerResponse, or the raw socket of an Upgrade request. */
interface Sink {
  socket: Duplex;
  send(r: Response): Promise<void>;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

async function readCapped(req: http.IncomingMessage): Promise<{ body: Uint8Array; tooLarge: boolean }> {
  const chunks: Buffer[] = [];
  let n = 0;
  let tooLarge = false;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    n += chunk.length;
    if (n > MAX_REQUEST_BODY_BYTES) tooLarge = true; // keep draining so the reply can still be written
    else chunks.push(chunk);
  }
  return { body: tooLarge ? new Uint8Array() : Buffer.concat(chunks), tooLarge };
}

function toRequest(req: http.IncomingMessage, url: string): Request {
  const headers = new Headers();
  for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) headers.append(req.rawHeaders[i]!, req.rawHeaders[i + 1]!);
  return new Request(url, { method: req.method ?? "GET", headers });
}

/**
 * The request's URL with its target in origin form, or why it has none: the asterisk form, a Host that does not
 * make a URL, a malformed escape (shared/http's checks). An absolute-form target counts by its path and query
 * (RFC 9112 §3.2.2), as sandboxd's Go listener takes it.
 */
function requestUrl(req: http.IncomingMessage, fallbackHost: string): { url: string } | { problem: TargetProblem } {
  let target = req.url ?? "/";
  if (!target.startsWith("/")) {
    if (!URL.canParse(target)) return { problem: { status: 400, message: "the request target is neither in origin nor in absolute form" } };
    const abs = new URL(target);
    target = abs.pathname + abs.search;
  }
  const url = `http://${req.headers.host ?? fallbackHost}${target}`;
  const problem = requestTargetProblem(req.method ?? "GET", url);
  return problem ? { problem } : { url };
}

async function writeResponse(res: http.ServerResponse, r: Response): Promise<void> {
  const body = Buffer.from(await r.arrayBuffer());
  const headers: Record<string, string> = {};
  r.headers.forEach((v, k) => (headers[k] = v));
  if (r.status !== 204 && r.status !== 304) headers["content-length"] = String(body.length);
  res.writeHead(r.status, headers);
  res.end(r.status === 204 ? undefined : body);
}

function injected(status: number, body: unknown): Response {
  if (body === undefined) return new Response(JSON.stringify({ error: `injected ${status}` }), { status, headers: { "content-type": "application/json" } });
  if (typeof body === "string") {
    let isJson = false;
    try {
      JSON.parse(body);
      isJson = true;
    } catch {}
    return new Response(body, { status, headers: { "content-type": isJson ? "application/json" : "text/plain; charset=utf-8" } });
  }
  return new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });
}

export class NodeServer {
  private server: http.Server | undefined;
  private readonly sockets = new Set<Duplex>();
  port = 0;
  host = "127.0.0.1";

  constructor(private readonly d: NodeServerDeps) {}

  async listen(host: string, port: number): Promise<void> {
    const server = http.createServer((req, res) => void this.onRequest(req, res));
    server.on("upgrade", (req, socket, head) => void this.onUpgrade(req, socket, head));
    // sandboxd tunnels nothing: CONNECT gets the {error} body (node:http would otherwise drop the socket unanswered).
    server.on("connect", (_req, socket: Duplex) => {
      socket.on("error", () => socket.destroy());
      writeRawResponse(socket, 405, { "content-type": "application/json" }, JSON.stringify({ error: "CONNECT is not supported" }));
    });
    server.on("connection", (s) => {
      this.sockets.add(s);
      s.on("close", () => this.sockets.delete(s));
    });
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, host, () => resolve());
    });
    this.server = server;
    this.host = host;
    this.port = (server.address() as { port: number }).port;
  }

  async close(): Promise<void> {
    const s = this.server;
    this.server = undefined;
    for (const sock of this.sockets) sock.destroy();
    this.sockets.clear();
    if (s) await new Promise<void>((r) => s.close(() => r()));
  }

  private authKind(authorization: string | undefined): { auth: AuthKind; tenant?: string } {
    const b = bearerOf(authorization);
    if (b === undefined) return { auth: "none" };
    const t = this.d.node.tokens;
    if (t.isRoot(b)) return { auth: "root" };
    const tenant = t.tenantOf(b);
    if (tenant !== undefined) return { auth: "tenant", tenant };
    if (this.d.node.table.byToken(b)) return { auth: "sandbox" };
    return { auth: "unknown" };
  }

  private logEntry(req: http.IncomingMessage, url: URL, route: string | null, body: Uint8Array): RequestLogEntry {
    const query: Record<string, string[]> = {};
    for (const [k, v] of url.searchParams) (query[k] ??= []).push(v);
    return this.d.log.add({
      at: this.d.node.clock.now(),
      node: this.d.node.addr,
      method: req.method ?? "GET",
      path: url.pathname,
      query,
      route,
      ...this.authKind(req.headers.authorization),
      body: decodeLoggedBody(body),
    });
  }

  private async onRequest(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    try {
      const raw = await readCapped(req);
      const sink: Sink = { socket: req.socket, send: (r) => writeResponse(res, r) };
      await this.dispatch(req, { ...raw, upgradable: false }, sink);
    } catch {
      req.socket.destroy();
    }
  }

  private async onUpgrade(req: http.IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    socket.on("error", () => socket.destroy());
    const sink: Sink = {
      socket,
      send: async (r) => {
        const relay = r.headers.get(RELAY_MARKER);
        if (relay !== null) return; // handled by dispatch
        const headers: Record<string, string> = {};
        r.headers.forEach((v, k) => (headers[k] = v));
        writeRawResponse(socket, r.status, headers, new Uint8Array(await r.arrayBuffer()));
      },
    };
    try {
      await this.dispatch(req, { body: new Uint8Array(), tooLarge: false, upgradable: true }, sink, head);
    } catch {
      socket.destroy();
    }
  }

  private async dispatch(req: http.IncomingMessage, raw: RawRequest, sink: Sink, head?: Buffer): Promise<void> {
    const target = requestUrl(req, `${this.host}:${this.port}`);
    if ("problem" in target) return sink.send(simErrorResponse(target.problem.status, target.problem.message));
    const url = new URL(target.url);
    const request = toRequest(req, target.url);
    if (this.d.admin && url.pathname.startsWith("/_sim/")) {
      const withBody = new Request(request, { body: raw.body.byteLength ? Buffer.from(raw.body) : undefined });
      return sink.send(await this.d.admin(withBody));
    }
    const m = matchRoute(req.method ?? "GET", url.pathname);
    const entry = this.logEntry(req, url, m.kind === "route" ? m.name : null, raw.body);
    if (m.kind !== "route") {
      const r = routerMiss(m);
      entry.outcome = r.status;
      return sink.send(r);
    }
    const route: RouteName = m.name;
    const { faults } = this.d;
    // A queued fault belongs to the requests that arrive after it was set: taken on arrival, before the latency,
    // so a slow request already in flight (a cold claim) is not hit by a fault set while it waits.
    const action = route === "list" && faults.listMode ? undefined : faults.take(route, url.pathname);
    const delay = faults.latencyFor(route);
    if (delay > 0) await sleep(delay);

    if (route === "list" && faults.listMode) {
      const mode = faults.listMode;
      if (mode === "hang") return void (entry.outcome = "hang");
      if (mode === "500") {
        entry.outcome = 500;
        return sink.send(injected(500, { error: "listing failed" }));
      }
      if (mode === "oversize") {
        // Valid JSON, one byte shy of nothing: 16 MiB + 1 KiB, past the client's reply cap.
        entry.outcome = 200;
        const pad = "x".repeat(16 * 1024 * 1024 + 1024);
        return sink.send(new Response(`{"sandboxes":[],"padding":"${pad}"}`, { status: 200, headers: { "content-type": "application/json" } }));
      }
      // truncated: the real listing, cut in half (a decode error, with a consistent Content-Length).
      const real = await (await this.d.app.fetch(request, { raw })).text();
      entry.outcome = 200;
      return sink.send(new Response(real.slice(0, Math.floor(real.length / 2)), { status: 200, headers: { "content-type": "application/json" } }));
    }

    if (action?.kind === "hang" && action.when !== "after") return void (entry.outcome = "hang");
    if (action?.kind === "reset" && action.when === "before") {
      entry.outcome = "reset";
      return void sink.socket.destroy();
    }
    if (action?.kind === "fail") {
      entry.outcome = action.status;
      return sink.send(injected(action.status, action.body));
    }

    const r = await this.d.app.fetch(request, { raw });
    // Guests follow the verb at once: a claim gets its guest before the reply, a release kills it.
    this.d.node.syncGuests();
    // Committed, and the reply is held forever: the caller sees neither an answer nor a reset (a process killed
    // in that window is the crash tests' "sandboxd delivered, the table never recorded").
    if (action?.kind === "hang") return void (entry.outcome = "hang");
    if (action?.kind === "reset" && action.when === "after") {
      // Committed (the claim exists, the sandbox is released…), but the reply never leaves.
      entry.outcome = "reset";
      return void sink.socket.destroy();
    }
    const relay = r.headers.get(RELAY_MARKER);
    if (relay !== null && head !== undefined) {
      // An active relay holds its sandbox's idle clock from the 101 until either side closes (idle.ts).
      const held = this.d.node.table.get(r.headers.get(RELAY_HOLD) ?? "");
      let release: (() => void) | undefined;
      spliceToGuest(sink.socket, head, relay, (o) => {
        entry.outcome = o;
        if (o === "upgraded" && held) release = this.d.node.hold(held);
      }, () => release?.(), r.headers.get(RELAY_PROTOCOL) ?? "tcp");
      return;
    }
    entry.outcome = r.status;
    return sink.send(r);
  }
}
