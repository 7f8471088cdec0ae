// Which authority signed a client certificate (docs/serving.md "Authentication"): the front-proxy CA
// (requestheader-client-ca-file: the aggregator, whose X-Remote-* headers then carry the caller) or the client CA
// (client-ca-file: CN is the user, O the groups). This is the whole verification: the TLS layer asks for a
// certificate without naming or checking authorities, so the authorities can be reloaded without a restart and a
// client never withholds its certificate because an old CA list did not name its issuer. A leaf must be signed
// directly by one of the CAs (no intermediates) and be within its validity.
import { x509 } from "../../../shared/tls/x509.ts";

export type CertSource = "requestheader" | "client";

export interface PeerCert {
  source: CertSource;
  commonName: string;
  organizations: string[];
}

export function parseCertBundle(pem: string): x509.X509Certificate[] {
  const blocks = pem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
  return blocks.map((b) => new x509.X509Certificate(b));
}

export class ClientCertVerifier {
  constructor(
    private requestHeaderCAs: x509.X509Certificate[],
    private clientCAs: x509.X509Certificate[],
  ) {}

  /** Replaces both authorities (a reloaded extension-apiserver-authentication); new connections use them. */
  update(requestHeaderCAs: x509.X509Certificate[], clientCAs: x509.X509Certificate[]): void {
    this.requestHeaderCAs = requestHeaderCAs;
    this.clientCAs = clientCAs;
  }

  /** The verified source of a DER leaf, or undefined when neither authority signed it or it is expired. */
  async classify(der: Uint8Array, now = new Date()): Promise<PeerCert | undefined> {
    let leaf: x509.X509Certificate;
    try {
      leaf = new x509.X509Certificate(new Uint8Array(der));
    } catch {
      return undefined;
    }
    if (leaf.notBefore > now || leaf.notAfter < now) return undefined;
    for (const [source, cas] of [["requestheader", this.requestHeaderCAs], ["client", this.clientCAs]] as const) {
      for (const ca of cas) {
        if (leaf.issuer !== ca.subject) continue;
        try {
          if (await leaf.verify({ publicKey: ca.publicKey, signatureOnly: true })) {
            const name = leaf.subjectName;
            return {
              source,
              commonName: name.getField("CN")[0] ?? "",
              organizations: name.getField("O"),
            };
          }
        } catch {
          // a key of another algorithm: not this CA
        }
      }
    }
    return undefined;
  }
}
