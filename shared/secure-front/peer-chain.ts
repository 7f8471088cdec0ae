// The certificates a TLS client sent, for a `peer` callback that verifies them itself (front.ts).

interface DetailedPeerCertificate {
  raw?: Uint8Array;
  fingerprint256?: string;
  issuerCertificate?: DetailedPeerCertificate;
}

/** The certificates the client sent, DER, leaf first (`getPeerCertificate(true)` links them by issuerCertificate). */
export function presentedChain(sock: { getPeerCertificate?(detailed: true): unknown }): Uint8Array[] {
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
