// The secure port (docs/serving.md "Secure serving"). Bun.serve does not expose a client's certificate to the
// request handler, and delegated authentication needs it (the aggregator authenticates with one), so TLS is
// terminated by a node:tls server, which does (`getPeerCertificate`). Each TLS connection is relayed to an internal
// Bun.serve listening on a Unix socket in a fresh 0700 directory, so no other user of the machine can reach it (a
// loopback TCP port can be reached by anyone, and a pipe's source port can be reproduced from another address).
// The verified certificate travels with the connection: the front gives each connection a random secret, adds it to
// every request head it forwards (request-framer.ts) and drops a client's own copy; the handler finds the peer by
// that secret. A request without a known secret is refused, whatever it claims. HTTP parsing, streaming (watch) and
// keep-alive stay Bun's; the front adds no syscall per request (one write per chunk read, as the pipe did).
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import tls from "node:tls";
import type { Server } from "bun";
import type { Logger } from "pino";
import { cipherOptions } from "./cipher-suites.ts";
import type { ClientCertVerifier, PeerCert } from "./client-certs.ts";
import { CONNECTION_HEADER, INTERNAL_HEADERS, REFUSED_HEADER } from "./internal-headers.ts";
import { RequestFramer } from "./request-framer.ts";

export interface SecureServerOptions {
  bindAddress: string;
  port: number;
  certPem: string;
  keyPem: string;
  verifier: ClientCertVerifier;
  /** `VersionTLS12`-style name, as the Go flag takes it. */
  minVersion?: string;
  /** --tls-cipher-suites: IANA names, already checked by the flag (serving/cipher-suites.ts). */
  cipherSuites?: readonly string[];
  handler: (req: Request, peer: PeerCert | undefined) => Response | Promise<Response>;
  /** Renders an error the server answers itself (a refused head, a crash) as a Kubernetes Status. */
  errorResponse: (code: number, message: string) => Response;
  /** Largest request body accepted (a declared larger one is refused with 413 before it is read). */
  maxBodyBytes: number;
  /** Lower-cased header name → whether it carries identity (its lines are kept one value each). */
  isIdentityHeader: (lowerName: string) => boolean;
  log: Logger;
}

export interface SecureServer {
  /** The port actually bound (the flag's, or the one the OS picked for 0). */
  port: number;
  /** The internal listener's socket path (in a directory only this user may enter). */
  internalSocket: string;
  /** Stops accepting, and ends every open connection (open watches included). */
  stop(): Promise<void>;
}

const TLS_VERSIONS: Record<string, tls.SecureVersion> = {
  VersionTLS10: "TLSv1",
  VersionTLS11: "TLSv1.1",
  VersionTLS12: "TLSv1.2",
  VersionTLS13: "TLSv1.3",
};

const NO_IDLE_TIMEOUT = { idleTimeout: 0 };

export async function startSecureServer(o: SecureServerOptions): Promise<SecureServer> {
  /** Connection secret → what the TLS front knew about its peer (undefined: no verified cert). */
  const peers = new Map<string, PeerCert | undefined>();
  const dir = mkdtempSync(join(tmpdir(), "sandbox-apiserver-")); // mode 0700
  const internalSocket = join(dir, "internal.sock");
  const internal: Server<unknown> = Bun.serve({
    unix: internalSocket,
    development: false,
    // Watches stay open for minutes; the TLS front owns connection lifetimes. Bun honours idleTimeout on a Unix
    // socket too (a silent watch was cut at 10 s without it), though its types list it only for TCP.
    ...(NO_IDLE_TIMEOUT as object),
    // A backstop only: the front refuses a declared larger body, and the app counts a chunked one.
    maxRequestBodySize: o.maxBodyBytes * 2,
    error(err) {
      o.log.error({ err: err.message }, "request failed");
      return o.errorResponse(500, "Internal error occurred: the request could not be served");
    },
    fetch(req) {
      const secret = req.headers.get(CONNECTION_HEADER);
      if (secret === null || !peers.has(secret)) return o.errorResponse(403, "connections are accepted only through the secure port");
      const peer = peers.get(secret);
      const refused = req.headers.get(REFUSED_HEADER);
      if (refused !== null) {
        const [code = "400", ...words] = refused.split(" ");
        return o.errorResponse(Number(code), words.join(" "));
      }
      for (const h of INTERNAL_HEADERS) req.headers.delete(h);
      return o.handler(req, peer);
    },
  });
  const sockets = new Set<net.Socket>();
  const suites = cipherOptions(o.cipherSuites ?? []);
  // Only TLS 1.3 suite names raise the floor to TLS 1.3; otherwise --tls-min-version decides.
  const minVersion = suites.minVersion ?? (o.minVersion ? TLS_VERSIONS[o.minVersion] : undefined);

  const front = tls.createServer(
    {
      cert: o.certPem,
      key: o.keyPem,
      requestCert: true,
      rejectUnauthorized: false,
      ...(minVersion ? { minVersion } : {}),
      ...(suites.ciphers ? { ciphers: suites.ciphers } : {}),
    },
    (sock) => {
      sockets.add(sock);
      void (async () => {
        let peer: PeerCert | undefined;
        try {
          // Verified by the verifier itself, not by `sock.authorized` (see client-certs.ts).
          const chain = presentedChain(sock);
          if (chain.length) peer = await o.verifier.classify(chain);
          if (peer?.source === "rejected") o.log.info({ remote: sock.remoteAddress, reason: peer.reason }, "client certificate refused");
        } catch (e) {
          o.log.debug({ err: (e as Error).message }, "client certificate could not be classified; treating the connection as certless");
        }
        if (sock.destroyed) return;
        const secret = randomBytes(18).toString("base64url");
        const framer = new RequestFramer({ secret, maxBodyBytes: o.maxBodyBytes, isIdentityHeader: o.isIdentityHeader });
        const up = net.connect({ path: internalSocket });
        sockets.add(up);
        up.once("connect", () => {
          peers.set(secret, peer);
          sock.on("data", (chunk: Buffer) => {
            if (framer.done) return; // after a refusal: dropped, the connection closes after its answer
            const out = framer.feed(chunk);
            if (framer.broken) {
              o.log.debug({ remote: sock.remoteAddress }, "malformed chunked request body; closing the connection");
              close();
              return;
            }
            if (out.length > 0 && !up.write(out)) sock.pause();
          });
          up.on("drain", () => sock.resume());
          up.pipe(sock);
        });
        const close = () => {
          peers.delete(secret);
          sockets.delete(sock);
          sockets.delete(up);
          sock.destroy();
          up.destroy();
        };
        sock.once("close", close);
        up.once("close", close);
        sock.on("error", close);
        up.on("error", close);
      })();
    },
  );
  front.on("tlsClientError", (err) => o.log.debug({ err: err.message }, "TLS handshake failed"));
  await new Promise<void>((resolve, reject) => {
    front.once("error", reject);
    front.listen(o.port, o.bindAddress, () => {
      front.off("error", reject);
      resolve();
    });
  });
  const addr = front.address();
  const port = typeof addr === "object" && addr ? addr.port : o.port;
  return {
    port,
    internalSocket,
    stop: async () => {
      await new Promise<void>((resolve) => {
        front.close(() => resolve());
        for (const s of sockets) s.destroy();
      });
      await internal.stop(true);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

interface DetailedPeerCertificate {
  raw?: Uint8Array;
  fingerprint256?: string;
  issuerCertificate?: DetailedPeerCertificate;
}

/** The certificates the client sent, DER, leaf first (`getPeerCertificate(true)` links them by issuerCertificate). */
function presentedChain(sock: tls.TLSSocket): Uint8Array[] {
  const out: Uint8Array[] = [];
  const seen = new Set<string>();
  let cert = sock.getPeerCertificate?.(true) as DetailedPeerCertificate | undefined;
  // A self-signed root links to itself: stop at the first repeat.
  while (cert?.raw && !seen.has(cert.fingerprint256 ?? String(out.length))) {
    seen.add(cert.fingerprint256 ?? String(out.length));
    out.push(cert.raw);
    cert = cert.issuerCertificate;
  }
  return out;
}
