// Which authority vouches for a client's certificate chain (docs/serving.md "Client certificates"): the front-proxy
// CA (requestheader-client-ca-file: the aggregator, whose X-Remote-* headers then carry the caller) or the client CA
// (client-ca-file: CN is the user, O the groups). This is the whole verification: the TLS layer asks for a
// certificate without naming or checking authorities, so the authorities can be reloaded without a restart and a
// client never withholds its certificate because an old CA list did not name its issuer.
//
// As Go's x509 verification (which kube's authenticators use): the leaf and the intermediates the client sent after
// it are chained up to one of the configured CAs; every certificate on the path must be within its validity,
// every intermediate must be a CA (basic constraints) within its path length, and every certificate on the path that
// restricts its extended key usage must allow client authentication. A chain that does not verify is refused with
// the reason (authn then answers 401, as kube-apiserver does).
//
// node:crypto parses and checks signatures; what it does not expose (the subject's attributes, the path length) is
// read from the DER (shared/tls/cert-fields.ts): no X.509 library in this binary (idle RSS, docs/performance.md).
import { X509Certificate } from "node:crypto";
import { type CertFields, certFields } from "#shared/tls/index.ts";

export type CertSource = "requestheader" | "client";

export type PeerCert =
  | { source: CertSource; commonName: string; organizations: string[] }
  /** A certificate was presented and neither authority verifies its chain: why, for each configured authority. */
  | { source: "rejected"; reason: string };

/** A parsed certificate: node:crypto's view plus the fields read from its DER. */
export interface Cert {
  x509: X509Certificate;
  fields: CertFields;
  notBefore: Date;
  notAfter: Date;
  /** EKU OIDs, undefined when the certificate does not restrict them. */
  extKeyUsage: string[] | undefined;
}

function parseCert(input: string | Uint8Array): Cert {
  const x = new X509Certificate(input);
  const eku = x.keyUsage as string[] | undefined; // node:crypto's keyUsage is the extended key usage list
  return { x509: x, fields: certFields(x.raw), notBefore: x.validFromDate, notAfter: x.validToDate, extKeyUsage: eku };
}

export function parseCertBundle(pem: string): Cert[] {
  const blocks = pem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
  return blocks.map((b) => parseCert(b));
}

/** How many distinct chains' verdicts are kept (the aggregator and a few admins present the same few). */
const VERDICTS_MAX = 1024;
/** Longest path searched (leaf + intermediates), and the most signatures checked for one chain (Go stops at 100). */
const MAX_PATH = 10;
const MAX_SIGNATURE_CHECKS = 100;

const CLIENT_AUTH = "1.3.6.1.5.5.7.3.2";
const ANY_EKU = "2.5.29.37.0";

const AUTHORITY_FLAG: Record<CertSource, string> = {
  requestheader: "the front-proxy CA (--requestheader-client-ca-file)",
  client: "the client CA (--client-ca-file)",
};

interface Verdict {
  peer: PeerCert;
  /** The window in which the verdict holds: the intersection of the path's validity periods. */
  notBefore: Date;
  notAfter: Date;
}

const ALWAYS = { notBefore: new Date(-8.64e15), notAfter: new Date(8.64e15) };

export class ClientCertVerifier {
  /**
   * Verdicts by the chain's DER bytes: the aggregator presents one certificate on every connection it opens,
   * and parsing plus verifying it cost more CPU than the request the connection carries. The same bytes are the
   * same chain (the TLS handshake proved the leaf's key), so a hit only checks that `now` is inside the verdict's
   * window; outside it the chain is verified again. A refusal that depended on the time is not kept.
   * Emptied whenever the authorities change.
   */
  private readonly verdicts = new Map<string, Verdict>();

  constructor(
    private requestHeaderCAs: Cert[],
    private clientCAs: Cert[],
  ) {}

  /** Replaces both authorities (a reloaded extension-apiserver-authentication); new connections use them. */
  update(requestHeaderCAs: Cert[], clientCAs: Cert[]): void {
    this.requestHeaderCAs = requestHeaderCAs;
    this.clientCAs = clientCAs;
    this.verdicts.clear();
  }

  /**
   * The verified source of a presented chain (DER, leaf first, then the intermediates in the order sent), or a
   * refusal with its reason. A lone leaf is a chain of one.
   */
  async classify(chain: Uint8Array | readonly Uint8Array[], now = new Date()): Promise<PeerCert> {
    const ders = chain instanceof Uint8Array ? [chain] : chain;
    const key = ders.map((d) => Buffer.from(d.buffer, d.byteOffset, d.byteLength).toString("base64")).join(".");
    const kept = this.verdicts.get(key);
    if (kept && kept.notBefore <= now && now <= kept.notAfter) return kept.peer;
    const cas = { requestHeader: this.requestHeaderCAs, client: this.clientCAs };
    const { verdict, keep } = await this.verdictOf(ders, now);
    // Authorities replaced while verifying: the verdict is the old set's, so it is not kept.
    if (keep && cas.requestHeader === this.requestHeaderCAs && cas.client === this.clientCAs) {
      this.verdicts.delete(key);
      this.verdicts.set(key, verdict);
      if (this.verdicts.size > VERDICTS_MAX) this.verdicts.delete(this.verdicts.keys().next().value as string);
    }
    return verdict.peer;
  }

  private async verdictOf(ders: readonly Uint8Array[], now: Date): Promise<{ verdict: Verdict; keep: boolean }> {
    let certs: Cert[];
    try {
      certs = ders.map((d) => parseCert(d));
    } catch (e) {
      return { verdict: { peer: { source: "rejected", reason: `unparseable certificate: ${(e as Error).message}` }, ...ALWAYS }, keep: true };
    }
    const [leaf, ...intermediates] = certs as [Cert, ...Cert[]];
    const reasons: string[] = [];
    let timeDependent = false;
    for (const [source, roots] of [["requestheader", this.requestHeaderCAs], ["client", this.clientCAs]] as const) {
      if (roots.length === 0) continue;
      const search = new PathSearch(roots, intermediates, now);
      const path = await search.from(leaf);
      if (path) {
        const name = leaf.fields.subject;
        return {
          verdict: {
            peer: { source, commonName: name.find(([k]) => k === "CN")?.[1] ?? "", organizations: name.filter(([k]) => k === "O").map(([, v]) => v) },
            notBefore: new Date(Math.max(...path.map((c) => c.notBefore.getTime()))),
            notAfter: new Date(Math.min(...path.map((c) => c.notAfter.getTime()))),
          },
          keep: true,
        };
      }
      timeDependent ||= search.timeDependent;
      reasons.push(`not verified by ${AUTHORITY_FLAG[source]}: ${search.problem ?? unknownAuthority(leaf)}`);
    }
    const reason = reasons.length ? reasons.join("; ") : "no client CA is configured";
    return {
      verdict: { peer: { source: "rejected", reason: `client certificate ${describe(leaf)}: ${reason}` }, ...ALWAYS },
      keep: !timeDependent,
    };
  }
}

/**
 * A depth-first search for a path leaf → intermediates → one root, as Go's Certificate.Verify builds one. `problem`
 * keeps the first specific refusal met on the way (an expired certificate, a non-CA issuer, a usage that excludes
 * client authentication), which says more than "unknown authority" when a path almost existed.
 */
class PathSearch {
  problem: string | undefined;
  /** Some candidate was refused only for its validity period: the same chain may verify at another time. */
  timeDependent = false;
  private signatureChecks = 0;

  constructor(
    private readonly roots: readonly Cert[],
    private readonly intermediates: readonly Cert[],
    private readonly now: Date,
  ) {}

  async from(leaf: Cert): Promise<Cert[] | undefined> {
    if (!this.current(leaf)) return undefined;
    // A leaf that is itself one of the roots is trusted as it is (as Go does).
    if (this.roots.some((r) => sameCert(r, leaf))) return this.usable([leaf]);
    return this.extend([leaf]);
  }

  /** Tries every issuer of the path's last certificate: the roots first, then the client's intermediates. */
  private async extend(path: Cert[]): Promise<Cert[] | undefined> {
    const child = path[path.length - 1]!;
    for (const root of this.roots) {
      if (!(await this.signedBy(child, root))) continue;
      if (!this.current(root) || !this.withinPathLength(root, path)) continue;
      const full = this.usable([...path, root]);
      if (full) return full;
    }
    if (path.length >= MAX_PATH) return undefined;
    for (const inter of this.intermediates) {
      if (path.some((c) => sameCert(c, inter))) continue;
      if (!(await this.signedBy(child, inter))) continue;
      if (!inter.x509.ca) {
        this.problem ??= `${describe(inter)} is not authorized to sign other certificates (not a CA)`;
        continue;
      }
      if (!this.current(inter) || !this.withinPathLength(inter, path)) continue;
      const found = await this.extend([...path, inter]);
      if (found) return found;
    }
    return undefined;
  }

  private async signedBy(child: Cert, issuer: Cert): Promise<boolean> {
    if (child.x509.issuer !== issuer.x509.subject || this.signatureChecks >= MAX_SIGNATURE_CHECKS) return false;
    this.signatureChecks++;
    try {
      return child.x509.verify(issuer.x509.publicKey);
    } catch {
      return false; // a key of another algorithm: not this issuer
    }
  }

  private current(cert: Cert): boolean {
    if (cert.notBefore <= this.now && this.now <= cert.notAfter) return true;
    this.timeDependent = true;
    const when = this.now > cert.notAfter ? `expired at ${cert.notAfter.toISOString()}` : `is not valid before ${cert.notBefore.toISOString()}`;
    this.problem ??= `${describe(cert)} ${when} (now ${this.now.toISOString()})`;
    return false;
  }

  /** `ca`'s pathLenConstraint bounds the intermediates below it (the leaf does not count). */
  private withinPathLength(ca: Cert, below: readonly Cert[]): boolean {
    const max = ca.fields.pathLength;
    if (max === undefined || below.length - 1 <= max) return true;
    this.problem ??= `${describe(ca)} allows ${max} intermediate(s) below it, the chain has ${below.length - 1}`;
    return false;
  }

  /** Every certificate that restricts its extended key usage must allow client authentication. */
  private usable(path: Cert[]): Cert[] | undefined {
    for (const cert of path) {
      const usages = cert.extKeyUsage;
      if (!usages || usages.length === 0 || usages.includes(CLIENT_AUTH) || usages.includes(ANY_EKU)) continue;
      this.problem ??= `${describe(cert)} is not valid for client authentication (extended key usage ${usages.join(", ")})`;
      return undefined;
    }
    return path;
  }
}

function sameCert(a: Cert, b: Cert): boolean {
  return a.x509.raw.equals(b.x509.raw);
}

function describe(cert: Cert): string {
  return `"${nameOf(cert.fields.subject)}"`;
}

function unknownAuthority(leaf: Cert): string {
  return `signed by unknown authority (issuer "${leaf.x509.issuer.split("\n").join(", ")}")`;
}

/** A distinguished name as "CN=a, O=b" (the form the refusal reasons and docs use). */
function nameOf(attrs: Array<[string, string]>): string {
  return attrs.map(([k, v]) => `${k}=${v}`).join(", ");
}
