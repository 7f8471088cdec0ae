// The proxy's listener: Bun.serve with HTTP/2 on (TLS: ALPN h2 + http/1.1; cleartext: HTTP/1.1 plus h2c by prior
// knowledge). No body or idle timeout that would cut a long pty or watch stream (Bun's idle timeout counts only
// silence, and it is disabled here; streams end when either side ends them).
import { readFileSync } from "node:fs";
import { splitHostPort } from "../config/index.ts";
import type { EnvdRelay } from "./proxy.ts";
import { wsRelayHandlers } from "./websocket.ts";

export interface RelayListen {
  address: string;
  tlsCertFile?: string;
  tlsPrivateKeyFile?: string;
}

export function serveRelay(relay: EnvdRelay, l: RelayListen): ReturnType<typeof Bun.serve> {
  const { host, port } = splitHostPort(l.address);
  const tls = l.tlsCertFile && l.tlsPrivateKeyFile ? { cert: readFileSync(l.tlsCertFile, "utf8"), key: readFileSync(l.tlsPrivateKeyFile, "utf8") } : undefined;
  return Bun.serve({
    hostname: host === "" ? "0.0.0.0" : host,
    port: Number(port),
    idleTimeout: 0,
    // Bun's default caps a request body at 128 MiB; the relay streams bodies of any size.
    maxRequestBodySize: Number.MAX_SAFE_INTEGER,
    http2: true,
    ...(tls ? { tls } : {}),
    fetch: relay.fetch,
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
