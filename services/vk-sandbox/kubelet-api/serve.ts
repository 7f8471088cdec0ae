// Binds the kubelet app over TLS. TLS 1.0 and 1.1 are switched off explicitly (Bun's defaults already refuse them
// today; the explicit options keep that true if a default ever moves), no client certificate is requested, and there
// is no authentication or authorization: the routes are stubs the apiserver dials without verifying.
import { constants } from "node:crypto";
import type { Hono } from "hono";
import type { CertKeyPem } from "#shared/tls/index.ts";

/** SSL_OP_NO_TLSv1 | SSL_OP_NO_TLSv1_1: minimum TLS 1.2. (SSLv2/3 are not compiled into BoringSSL at all.) */
export const TLS12_MINIMUM = constants.SSL_OP_NO_TLSv1 | constants.SSL_OP_NO_TLSv1_1;

/** Go's ReadHeaderTimeout on the kubelet server; Bun closes a connection idle this long, headers included. */
export const IDLE_TIMEOUT_SECONDS = 30;

export interface ServeKubeletOptions {
  app: Hono;
  tls: CertKeyPem;
  /** Default 0.0.0.0 (":10260" means every interface). */
  hostname?: string;
  port: number;
}

export interface KubeletServer {
  readonly port: number;
  stop(): Promise<void>;
}

/** Throws when the port cannot be bound: fatal at startup. */
export function serveKubeletApi(o: ServeKubeletOptions): KubeletServer {
  const server = Bun.serve({
    hostname: o.hostname || "0.0.0.0",
    port: o.port,
    idleTimeout: IDLE_TIMEOUT_SECONDS,
    tls: {
      cert: o.tls.certPem,
      key: o.tls.keyPem,
      requestCert: false,
      secureOptions: TLS12_MINIMUM,
    },
    fetch: (req) => o.app.fetch(req),
  });
  return {
    port: server.port ?? o.port,
    async stop() {
      await server.stop(true);
    },
  };
}
