// Which authority signed a client certificate (docs/serving.md "Authentication"): the front-proxy CA
// (requestheader-client-ca-file: the aggregator, whose X-Remote-* headers then carry the caller) or the client CA
// (client-ca-file: CN is the user, O the groups). This is the whole verification: the TLS layer asks for a
// certificate without naming or checking authorities, so the authorities can be reloaded without a restart and a
// client never withholds its certificate because an old CA list did not name its issuer. A leaf must be signed
// directly by one of the CAs (no intermediates) and be within its validity.
import { x509 } from "#shared/tls/index.ts";

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

/** How many distinct certificates' verdicts are kept (the aggregator and a few admins present the same few). */
const VERDICTS_MAX = 1024;

interface Verdict {
  peer: PeerCert | undefined;
  notBefore: Date;
  notAfter: Date;
}

export class ClientCertVerifier {
  /**
   * Verdicts by the certificate's DER bytes: the aggregator presents one certificate on every connection it opens,
   * and parsing plus verifying it cost more CPU than the request the connection carries. The same bytes are the
   * same certificate (the TLS handshake proved the key), so only the validity window is checked again on a hit.
   * Emptied whenever the authorities change.
   */
  private readonly verdicts = new Map<string, Verdict>();

  constructor(
    private requestHeaderCAs: x509.X509Certificate[],
    private clientCAs: x509.X509Certificate[],
  ) {}

  /** Replaces both authorities (a reloaded extension-apiserver-authentication); new connections use them. */
  update(requestHeaderCAs: x509.X509Certificate[], clientCAs: x509.X509Certificate[]): void {
    this.requestHeaderCAs = requestHeaderCAs;
    this.clientCAs = clientCAs;
    this.verdicts.clear();
  }

  /** The verified source of a DER leaf, or undefined when neither authority signed it or it is expired. */
  async classify(der: Uint8Array, now = new Date()): Promise<PeerCert | undefined> {
    const key = Buffer.from(der.buffer, der.byteOffset, der.byteLength).toString("base64");
    let v = this.verdicts.get(key);
    if (!v) {
      const cas = { requestHeader: this.requestHeaderCAs, client: this.clientCAs };
      v = await this.verdictOf(der);
      // Authorities replaced while verifying: the verdict is the old set's, so it is not kept.
      if (cas.requestHeader === this.requestHeaderCAs && cas.client === this.clientCAs) {
        this.verdicts.set(key, v);
        if (this.verdicts.size > VERDICTS_MAX) this.verdicts.delete(this.verdicts.keys().next().value as string);
      }
    }
    if (v.notBefore > now || v.notAfter < now) return undefined;
    return v.peer;
  }

  private async verdictOf(der: Uint8Array): Promise<Verdict> {
    let leaf: x509.X509Certificate;
    try {
      leaf = new x509.X509Certificate(new Uint8Array(der));
    } catch {
      return { peer: undefined, notBefore: new Date(0), notAfter: new Date(8.64e15) };
    }
    const window = { notBefore: leaf.notBefore, notAfter: leaf.notAfter };
    for (const [source, cas] of [["requestheader", this.requestHeaderCAs], ["client", this.clientCAs]] as const) {
      for (const ca of cas) {
        if (leaf.issuer !== ca.subject) continue;
        try {
          if (await leaf.verify({ publicKey: ca.publicKey, signatureOnly: true })) {
            const name = leaf.subjectName;
            return {
              peer: {
                source,
                commonName: name.getField("CN")[0] ?? "",
                organizations: name.getField("O"),
              },
              ...window,
            };
          }
        } catch {
          // a key of another algorithm: not this CA
        }
      }
    }
    return { peer: undefined, ...window };
  }
}
