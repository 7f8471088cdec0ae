// Binds the kubelet API over TLS (docs/decisions.md#kubelet-api-auth): the routes run on Bun.serve behind
// shared/secure-front's TLS front, as sandbox-apiserver's secure port does. Bun.serve does not show a handler the
// client's certificate, and the kube-apiserver authenticates to a kubelet with one, so node:tls terminates TLS (it
// asks for a certificate when --client-ca-file is set and verifies it against that CA, without requiring one: a
// bearer token is the other way in), `peerOf` reads the verdict off the TLS socket once per connection, and the
// front hands each request to the internal Bun.serve (a Unix socket in a 0700 directory) with that connection's
// secret, so the verdict travels with the connection and nobody else reaches the internal listener.
//
// TLS 1.0 and 1.1 are switched off explicitly. Nothing here answers with a stack or a development page: a head the
// front will not forward gets its 4xx (400 malformed, 405 CONNECT, 413 a body over the cap), a handler that throws
// 500, all plain text as the kubelet writes them.
import { constants } from "node:crypto";
import type { TLSSocket } from "node:tls";
import type { Log } from "#shared/log/index.ts";
import { startSecureFront } from "#shared/secure-front/index.ts";
import type { CertKeyPem } from "#shared/tls/index.ts";
import type { PeerCert } from "./authn.ts";

/** SSL_OP_NO_TLSv1 | SSL_OP_NO_TLSv1_1: minimum TLS 1.2. (SSLv2/3 are not compiled into BoringSSL at all.) */
export const TLS12_MINIMUM = constants.SSL_OP_NO_TLSv1 | constants.SSL_OP_NO_TLSv1_1;

/** Go's ReadHeaderTimeout on the kubelet server; a connection idle this long, headers included, is closed. */
export const IDLE_TIMEOUT_SECONDS = 30;

/** No kubelet route reads a body; exec and attach are refused before any stream. More than this is a 413. */
export const MAX_BODY_BYTES = 64 * 1024;

export interface ServeKubeletOptions {
  handler(req: Request, peer: PeerCert | undefined): Response | Promise<Response>;
  tls: CertKeyPem;
  /** PEM bundle that verifies client certificates; absent: none is asked for, and only bearer tokens work. */
  clientCaPem?: string;
  /** Default 0.0.0.0 (":10260" means every interface). */
  hostname?: string;
  port: number;
  log?: Log;
}

export interface KubeletServer {
  readonly port: number;
  /** The internal Bun.serve's Unix socket (in a 0700 directory; only the TLS front connects to it). */
  readonly internalSocket: string;
  stop(): Promise<void>;
}

const TEXT = { "Content-Type": "text/plain; charset=utf-8", "X-Content-Type-Options": "nosniff" };

const QUIET: Log = { debug() {}, info() {}, warn() {}, error() {} };

/** What the server answers itself, plain text as the kubelet's own refusals are. */
function plainError(code: number, message: string): Response {
  return new Response(`${message}\n`, { status: code, headers: TEXT });
}

/** The verdict on the socket's client certificate: undefined when it presented none. */
export function peerOf(sock: TLSSocket): PeerCert | undefined {
  const cert = sock.getPeerCertificate?.();
  if (!cert || Object.keys(cert).length === 0) return undefined;
  if (!sock.authorized) return { verified: false, reason: String(sock.authorizationError ?? "not verified by the client CA") };
  const list = (v: string | string[] | undefined) => (v === undefined ? [] : Array.isArray(v) ? v : [v]);
  const subject = cert.subject as unknown as Record<string, string | string[] | undefined> | undefined;
  return { verified: true, commonName: list(subject?.CN)[0] ?? "", organizations: list(subject?.O) };
}

export function serveKubeletApi(o: ServeKubeletOptions): Promise<KubeletServer> {
  return startSecureFront<PeerCert | undefined>({
    name: "vk-sandbox-kubelet",
    bindAddress: o.hostname || "0.0.0.0",
    port: o.port,
    tls: {
      cert: o.tls.certPem,
      key: o.tls.keyPem,
      minVersion: "TLSv1.2",
      secureOptions: TLS12_MINIMUM,
      // Asked for, verified against the client CA, never required: a client without one may hold a token.
      requestCert: o.clientCaPem !== undefined,
      rejectUnauthorized: false,
      ...(o.clientCaPem !== undefined ? { ca: o.clientCaPem } : {}),
      handshakeTimeout: IDLE_TIMEOUT_SECONDS * 1000,
    },
    peer: peerOf,
    handler: o.handler,
    errorResponse: plainError,
    internalErrorMessage: "internal error",
    maxBodyBytes: MAX_BODY_BYTES,
    idleTimeoutMs: IDLE_TIMEOUT_SECONDS * 1000,
    log: o.log ?? QUIET,
  });
}
