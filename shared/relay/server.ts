// The proxy's listener: Bun.serve with HTTP/2 on (TLS: ALPN h2 + http/1.1; cleartext: HTTP/1.1 plus h2c by prior
// knowledge). Requests enter through relayEntry: request shapes no handler can parse get the envelope first
// (shared/http), the idle timeout is held off while a request is answered (idle.ts), and whatever is thrown is
// logged once and answered with the envelope; Bun's development error page is never served. The proxy's own
// metrics are served on a separate listener (metrics-server.ts), never here.
import { readFileSync } from "node:fs";
import type { Server } from "bun";
import { splitHostPort } from "../config/index.ts";
import { requestTargetProblem, uncaughtErrorHandler } from "../http/index.ts";
import type { Logger } from "../log/index.ts";
import { RELAY_IDLE_TIMEOUT_S, RequestIdle } from "./idle.ts";
import { relayError, type EnvdRelay } from "./proxy.ts";
import { wsRelayHandlers, type WsRelayData } from "./websocket.ts";

export interface RelayListen {
  address: string;
  tlsCertFile?: string;
  tlsPrivateKeyFile?: string;
  /** Where a thrown handler error is logged (one structured line). */
  log: Logger;
  /** Seconds a keep-alive connection may idle between requests; default RELAY_IDLE_TIMEOUT_S (tests shorten it). */
  idleTimeoutSeconds?: number;
}

/** The relay's fetch handler as the listener runs it. Undefined: upgraded to a relayed WebSocket. */
export function relayEntry(relay: EnvdRelay, idleSeconds: number): (req: Request, server: Server<WsRelayData>) => Promise<Response | undefined> {
  return async function enterRelay(req, server) {
    const problem = requestTargetProblem(req.method, req.url);
    if (problem) {
      relay.metrics.requests.inc({ code: String(problem.status) });
      return relay.refuse(problem.status, problem.message, server.requestIP(req)?.address, req.signal);
    }
    const idle = new RequestIdle(server, req, idleSeconds);
    const res = await relay.fetch(req, server, idle);
    // A relayed guest body re-arms when the client has read it (h1.ts, guest.ts); a WebSocket has its own timeout.
    if (res !== undefined && !idle.awaitingBody) idle.rearm();
    return res;
  };
}

export function serveRelay(relay: EnvdRelay, l: RelayListen): ReturnType<typeof Bun.serve> {
  const { host, port } = splitHostPort(l.address);
  const tls = l.tlsCertFile && l.tlsPrivateKeyFile ? { cert: readFileSync(l.tlsCertFile, "utf8"), key: readFileSync(l.tlsPrivateKeyFile, "utf8") } : undefined;
  const idle = l.idleTimeoutSeconds ?? RELAY_IDLE_TIMEOUT_S;
  return Bun.serve({
    hostname: host === "" ? "0.0.0.0" : host,
    port: Number(port),
    idleTimeout: idle,
    // Bun's default caps a request body at 128 MiB; the relay streams bodies of any size.
    maxRequestBodySize: Number.MAX_SAFE_INTEGER,
    http2: true,
    ...(tls ? { tls } : {}),
    development: false,
    error: uncaughtErrorHandler(l.log, relayError),
    fetch: relayEntry(relay, idle),
    websocket: wsRelayHandlers,
  } as Parameters<typeof Bun.serve>[0]);
}

/** How long a stopping relay lets open streams (pty, watches, downloads) finish before it cuts them. */
export const RELAY_DRAIN_MS = 9_500;

/**
 * Stop accepting at once; let open streams finish for up to `drainMs`, then close what is left. Streams can live
 * as long as their client, so a plain graceful stop could wait forever (and be abandoned by the shutdown bound).
 */
export async function stopRelay(server: ReturnType<typeof Bun.serve>, drainMs = RELAY_DRAIN_MS): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const graceful = server.stop(false);
  const cut = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, drainMs);
  });
  await Promise.race([graceful, cut]);
  clearTimeout(timer);
  await server.stop(true);
}
