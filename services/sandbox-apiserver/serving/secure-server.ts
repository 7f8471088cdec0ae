// The secure port (docs/serving.md "Secure serving"). Bun.serve does not expose a client's certificate to the
// request handler, and delegated authentication needs it (the aggregator authenticates with one), so TLS is
// terminated by a node:tls server, which does (`getPeerCertificate`). Each TLS connection is piped to an internal
// Bun.serve on a loopback port; the pipe's local port is recorded with the verified peer certificate before any
// byte flows, and the handler finds it again through `server.requestIP(req).port`. HTTP parsing, streaming (watch)
// and keep-alive stay Bun's. The internal port serves only connections the TLS front opened: one from anywhere
// else has no recorded peer and gets 403, whatever it sends.
import net from "node:net";
import tls from "node:tls";
import type { Server } from "bun";
import type { Logger } from "pino";
import { cipherOptions } from "./cipher-suites.ts";
import type { ClientCertVerifier, PeerCert } from "./client-certs.ts";

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
  log: Logger;
}

export interface SecureServer {
  /** The port actually bound (the flag's, or the one the OS picked for 0). */
  port: number;
  /** Stops accepting, and ends every open connection (open watches included). */
  stop(): Promise<void>;
}

const TLS_VERSIONS: Record<string, tls.SecureVersion> = {
  VersionTLS10: "TLSv1",
  VersionTLS11: "TLSv1.1",
  VersionTLS12: "TLSv1.2",
  VersionTLS13: "TLSv1.3",
};

export async function startSecureServer(o: SecureServerOptions): Promise<SecureServer> {
  /** Internal connection's client port → what the TLS front knew about its peer (undefined: no verified cert). */
  const peers = new Map<number, PeerCert | undefined>();
  const internal: Server<unknown> = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    idleTimeout: 0, // watches stay open for minutes; the TLS front owns connection lifetimes
    fetch(req, server) {
      const port = server.requestIP(req)?.port;
      if (port === undefined || !peers.has(port)) {
        return new Response("connections are accepted only through the secure port", { status: 403 });
      }
      return o.handler(req, peers.get(port));
    },
  });
  const internalPort = internal.port!;
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
        const up = net.connect({ host: "127.0.0.1", port: internalPort });
        sockets.add(up);
        up.once("connect", () => {
          peers.set(up.localPort!, peer);
          sock.pipe(up);
          up.pipe(sock);
        });
        const close = () => {
          if (up.localPort !== undefined) peers.delete(up.localPort);
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
    stop: async () => {
      await new Promise<void>((resolve) => {
        front.close(() => resolve());
        for (const s of sockets) s.destroy();
      });
      await internal.stop(true);
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
