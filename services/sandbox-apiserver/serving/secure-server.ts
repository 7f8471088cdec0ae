// The secure port (docs/serving.md "Secure serving"): shared/secure-front's TLS front, with this server's view of a
// client certificate. The front asks for a certificate without naming or checking authorities, and the
// ClientCertVerifier verifies the chain the client sent (client-certs.ts says why); a certificate that cannot be
// classified leaves the connection certless. The front relays each connection to an internal Bun.serve on a Unix
// socket in a 0700 directory, with a per-connection secret after every request line (request-framer.ts there), so
// the verified certificate travels with the connection and nobody else reaches the internal listener.
import type { Logger } from "pino";
import { presentedChain, startSecureFront } from "#shared/secure-front/index.ts";
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

const TLS_VERSIONS: Record<string, "TLSv1" | "TLSv1.1" | "TLSv1.2" | "TLSv1.3"> = {
  VersionTLS10: "TLSv1",
  VersionTLS11: "TLSv1.1",
  VersionTLS12: "TLSv1.2",
  VersionTLS13: "TLSv1.3",
};

export function startSecureServer(o: SecureServerOptions): Promise<SecureServer> {
  const suites = cipherOptions(o.cipherSuites ?? []);
  // Only TLS 1.3 suite names raise the floor to TLS 1.3; otherwise --tls-min-version decides.
  const minVersion = suites.minVersion ?? (o.minVersion ? TLS_VERSIONS[o.minVersion] : undefined);
  return startSecureFront<PeerCert | undefined>({
    name: "sandbox-apiserver",
    bindAddress: o.bindAddress,
    port: o.port,
    tls: {
      cert: o.certPem,
      key: o.keyPem,
      requestCert: true,
      rejectUnauthorized: false,
      ...(minVersion ? { minVersion } : {}),
      ...(suites.ciphers ? { ciphers: suites.ciphers } : {}),
    },
    async peer(sock) {
      try {
        // Verified by the verifier itself, not by `sock.authorized` (see client-certs.ts).
        const chain = presentedChain(sock);
        if (!chain.length) return undefined;
        const peer = await o.verifier.classify(chain);
        if (peer.source === "rejected") o.log.info({ remote: sock.remoteAddress, reason: peer.reason }, "client certificate refused");
        return peer;
      } catch (e) {
        o.log.debug({ err: (e as Error).message }, "client certificate could not be classified; treating the connection as certless");
        return undefined;
      }
    },
    handler: o.handler,
    errorResponse: o.errorResponse,
    maxBodyBytes: o.maxBodyBytes,
    isIdentityHeader: o.isIdentityHeader,
    log: o.log,
  });
}
