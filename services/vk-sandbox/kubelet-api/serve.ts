// Binds the kubelet API over TLS (docs/decisions.md#kubelet-api-auth). Bun.serve does not show a handler the
// client's certificate, and the kube-apiserver authenticates to a kubelet with one, so TLS is node:tls (which asks
// for a certificate when --client-ca-file is set and verifies it against that CA, without requiring one: a bearer
// token is the other way in) and each TLS socket is handed to a node:http server in this process: the certificate
// is read off the very socket the request arrived on, so no identity travels between listeners.
//
// TLS 1.0 and 1.1 are switched off explicitly. Nothing here answers with a stack or a development page: a request
// that cannot be parsed gets 400, CONNECT 405, a body over the cap 413, a handler that throws 500, all plain text.
import { constants } from "node:crypto";
import http, { type IncomingMessage, type ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import tls, { type TLSSocket } from "node:tls";
import type { Log } from "#shared/log/index.ts";
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
  stop(): Promise<void>;
}

const TEXT = { "Content-Type": "text/plain; charset=utf-8", "X-Content-Type-Options": "nosniff" };

/** The verdict on the socket's client certificate: undefined when it presented none. */
export function peerOf(sock: TLSSocket): PeerCert | undefined {
  const cert = sock.getPeerCertificate?.();
  if (!cert || Object.keys(cert).length === 0) return undefined;
  if (!sock.authorized) return { verified: false, reason: String(sock.authorizationError ?? "not verified by the client CA") };
  const list = (v: string | string[] | undefined) => (v === undefined ? [] : Array.isArray(v) ? v : [v]);
  const subject = cert.subject as unknown as Record<string, string | string[] | undefined> | undefined;
  return { verified: true, commonName: list(subject?.CN)[0] ?? "", organizations: list(subject?.O) };
}

/** A whole response on a raw socket, for what never reaches the request handler (CONNECT, unparsable input). */
function rawReply(sock: Duplex, status: number, reason: string, text: string): void {
  const body = Buffer.from(`${text}\n`);
  sock.end(
    `HTTP/1.1 ${status} ${reason}\r\nContent-Type: text/plain; charset=utf-8\r\nX-Content-Type-Options: nosniff\r\n` +
      `Connection: close\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
  );
}

async function readBody(req: IncomingMessage): Promise<Buffer | "too-large"> {
  const declared = Number(req.headers["content-length"] ?? 0);
  if (declared > MAX_BODY_BYTES) return "too-large";
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) return "too-large";
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

async function toRequest(req: IncomingMessage): Promise<Request | Response> {
  let url: URL;
  try {
    // A fixed origin: the Host header is the client's to choose and plays no part in routing.
    url = new URL(req.url ?? "/", "https://kubelet.invalid");
  } catch {
    return new Response("malformed request target\n", { status: 400, headers: TEXT });
  }
  const headers = new Headers();
  for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) headers.append(req.rawHeaders[i]!, req.rawHeaders[i + 1]!);
  const method = req.method ?? "GET";
  let body: Uint8Array<ArrayBuffer> | undefined;
  if (method !== "GET" && method !== "HEAD") {
    const read = await readBody(req);
    if (read === "too-large") return new Response(`request body over ${MAX_BODY_BYTES} bytes\n`, { status: 413, headers: TEXT });
    body = read.length ? new Uint8Array(read) : undefined;
  }
  return new Request(url, { method, headers, ...(body ? { body } : {}) });
}

async function writeResponse(res: ServerResponse, method: string, r: Response): Promise<void> {
  const body = method === "HEAD" ? undefined : Buffer.from(await r.arrayBuffer());
  const headers: Record<string, string> = {};
  r.headers.forEach((v, k) => {
    headers[k] = v;
  });
  if (body) headers["content-length"] = String(body.length);
  res.writeHead(r.status, headers);
  res.end(body);
}

export async function serveKubeletApi(o: ServeKubeletOptions): Promise<KubeletServer> {
  const sockets = new Set<TLSSocket>();
  const respond = async (req: IncomingMessage, res: ServerResponse) => {
    const method = req.method ?? "GET";
    try {
      const request = await toRequest(req);
      const answer = request instanceof Response ? request : await o.handler(request, peerOf(req.socket as TLSSocket));
      await writeResponse(res, method, answer);
    } catch (e) {
      o.log?.error({ method, err: (e as Error).message }, "kubelet API request failed");
      if (!res.headersSent) await writeResponse(res, method, new Response("internal error\n", { status: 500, headers: TEXT }));
      else res.destroy();
    }
  };
  const h1 = http.createServer((req, res) => void respond(req, res));
  h1.on("connect", (_req: IncomingMessage, sock: Duplex) => rawReply(sock, 405, "Method Not Allowed", "CONNECT is not supported"));
  h1.on("clientError", (_e: Error, sock: Duplex) => {
    if (sock.writable) rawReply(sock, 400, "Bad Request", "malformed request");
    else sock.destroy();
  });

  const front = tls.createServer(
    {
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
    (sock) => {
      sockets.add(sock);
      sock.once("close", () => sockets.delete(sock));
      sock.on("error", () => sock.destroy());
      sock.setTimeout(IDLE_TIMEOUT_SECONDS * 1000, () => sock.destroy());
      h1.emit("connection", sock);
    },
  );
  front.on("tlsClientError", (err) => o.log?.debug({ err: err.message }, "kubelet API TLS handshake failed"));
  await new Promise<void>((resolve, reject) => {
    front.once("error", reject);
    front.listen(o.port, o.hostname || "0.0.0.0", () => {
      front.off("error", reject);
      resolve();
    });
  });
  const addr = front.address();
  return {
    port: typeof addr === "object" && addr ? addr.port : o.port,
    async stop() {
      await new Promise<void>((resolve) => {
        front.close(() => resolve());
        for (const s of sockets) s.destroy();
      });
      h1.close();
    },
  };
}
