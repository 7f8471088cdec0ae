// The one Bun-specific piece of the client: Bun's native fetch with its `tls` option. @kubernetes/client-node under
// Bun drops its undici dispatcher, so a kubeconfig's CA, client certificate and skip-verify are silently ignored
// (docs/decisions.md "kube-transport"); Bun's own `tls` option honours all three. Everything else in shared/kube is runtime-neutral.
import { readFile } from "node:fs/promises";
import { type Clock, realClock } from "../clock/index.ts";
import type { KubeConnection } from "./connection.ts";

export interface TransportInit {
  method: string;
  headers: Record<string, string>;
  body?: string;
  signal?: AbortSignal;
  /** Socket idle timeout in ms (Bun's `timeout`); 0 disables it. */
  idleTimeoutMs?: number;
}

export type Transport = (url: string, init: TransportInit) => Promise<Response>;

/** A fetch bound to the connection's TLS settings. Bun pools keep-alive connections per distinct `tls` object. */
export function bunTransport(conn: KubeConnection): Transport {
  const tls = conn.server.startsWith("https:")
    ? {
        // Skip-verify wins over a CA, as kubectl (which refuses the pair) would at best do.
        ...(conn.insecureSkipVerify ? {} : conn.caPem ? { ca: conn.caPem } : {}),
        ...(conn.certPem && conn.keyPem ? { cert: conn.certPem, key: conn.keyPem } : {}),
        ...(conn.tlsServerName ? { serverName: conn.tlsServerName } : {}),
        rejectUnauthorized: !conn.insecureSkipVerify,
      }
    : undefined;
  return (url, init) =>
    fetch(url, {
      method: init.method,
      headers: init.headers,
      body: init.body,
      signal: init.signal,
      tls,
      // The proxy connection.ts chose from HTTPS_PROXY/NO_PROXY as client-go does; never Bun's own env reading.
      proxy: conn.proxyUrl ?? false,
      ...(init.idleTimeoutMs !== undefined ? { timeout: init.idleTimeoutMs } : {}),
    });
}

/**
 * The bearer token. A token file is re-read at most once a minute, as client-go's cached token source does, so a
 * rotated projected service-account token is picked up; a failed re-read keeps the last good token.
 */
export class BearerToken {
  private cached: string | undefined;
  private readAt = -Infinity;
  /** The re-read in progress: every request of a burst at the reload moment shares it (one read, one warning). */
  private reading: Promise<string | undefined> | undefined;
  constructor(
    private readonly conn: Pick<KubeConnection, "token" | "tokenFile">,
    private readonly reloadMs = 60_000,
    private readonly clock: Pick<Clock, "monotonic"> = realClock,
    private readonly onReadError?: (e: unknown) => void,
  ) {
    this.cached = conn.token;
  }

  /** Forces the next get() to re-read the file: a 401 may mean the token rotated within the reload interval. */
  invalidate(): void {
    this.readAt = -Infinity;
    // A read that started before the 401 may return the token that was just refused; the next get() starts afresh.
    this.reading = undefined;
  }

  /** The token when it needs no (re-)read now, else undefined: get() without a turn of the event loop. */
  fresh(): string | undefined {
    if (!this.conn.tokenFile) return this.cached;
    return this.clock.monotonic() - this.readAt < this.reloadMs ? this.cached : undefined;
  }

  async get(): Promise<string | undefined> {
    const file = this.conn.tokenFile;
    if (!file) return this.cached;
    const t = this.clock.monotonic();
    if (t - this.readAt < this.reloadMs && this.cached) return this.cached;
    if (!this.reading) {
      const read: Promise<string | undefined> = this.reload(file, t).finally(() => {
        if (this.reading === read) this.reading = undefined;
      });
      this.reading = read;
    }
    return this.reading;
  }

  private async reload(file: string, t: number): Promise<string | undefined> {
    try {
      const v = (await readFile(file, "utf8")).trim();
      if (v) this.cached = v;
      this.readAt = t;
    } catch (e) {
      this.onReadError?.(e);
      if (!this.cached) throw e;
    }
    return this.cached;
  }
}
