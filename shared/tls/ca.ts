// A throwaway certificate authority and the leaves it signs. Used by test peers (the real kube-apiserver's serving
// cert, client-CA and admin cert) and by anything that wants mTLS between our own processes.
// @peculiar/x509 is loaded on first use: importing shared/tls (for a self-signed cert or a key pair) must not pay
// for it (idle RSS, see der.ts).
import type { x509 as X509 } from "../x509/index.ts";
import {
  type CertKeyPem,
  SIGNING_ALGORITHM,
  generateKeyPair,
  importSigningKey,
  privateKeyToPem,
  randomSerialHex,
} from "./keys.ts";
import { type Validity, defaultValidity } from "./validity.ts";

export interface CertificateAuthority extends CertKeyPem {
  /** Subject DN of the CA, e.g. "CN=test-ca". */
  subject: string;
}

export type CertificateUsage = "server" | "client" | "both";

export interface IssueCertificateOptions {
  ca: CertificateAuthority;
  cn: string;
  /** Subject O= values. Kubernetes reads them as group names (O=system:masters is cluster-admin). */
  organizations?: string[];
  dnsNames?: string[];
  ips?: string[];
  usages: CertificateUsage;
  validity?: Validity;
}

const loadX509 = async () => (await import("../x509/index.ts")).x509;

export async function createCA(cn: string, validity: Validity = defaultValidity()): Promise<CertificateAuthority> {
  const x509 = await loadX509();
  const keys = await generateKeyPair();
  const subject = new x509.Name([{ CN: [cn] }]).toString();
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: randomSerialHex(),
    name: subject,
    notBefore: validity.notBefore,
    notAfter: validity.notAfter,
    signingAlgorithm: SIGNING_ALGORITHM,
    keys,
    extensions: [
      new x509.BasicConstraintsExtension(true, undefined, true),
      new x509.KeyUsagesExtension(
        x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign | x509.KeyUsageFlags.digitalSignature,
        true,
      ),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  return { subject, certPem: cert.toString("pem") + "\n", keyPem: await privateKeyToPem(keys.privateKey) };
}

export interface IntermediateCAOptions {
  /** The authority that signs the intermediate (a root from createCA, or another intermediate). */
  parent: CertificateAuthority;
  cn: string;
  /** BasicConstraints pathLenConstraint: how many further intermediates may follow; unset means no limit. */
  pathLength?: number;
  validity?: Validity;
}

/**
 * An intermediate CA signed by `parent`: clients present it after their leaf (leaf + intermediates), and a verifier
 * that trusts only the root must build the chain itself. Its certPem is the intermediate alone.
 */
export async function createIntermediateCA(opts: IntermediateCAOptions): Promise<CertificateAuthority> {
  const x509 = await loadX509();
  const validity = opts.validity ?? defaultValidity();
  const parentCert = new x509.X509Certificate(opts.parent.certPem);
  const [parentKey, keys] = await Promise.all([importSigningKey(opts.parent.keyPem), generateKeyPair()]);
  const subject = new x509.Name([{ CN: [opts.cn] }]).toString();
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: randomSerialHex(),
    subject,
    issuer: parentCert.subject,
    notBefore: validity.notBefore,
    notAfter: validity.notAfter,
    signingAlgorithm: SIGNING_ALGORITHM,
    publicKey: keys.publicKey,
    signingKey: parentKey,
    extensions: [
      new x509.BasicConstraintsExtension(true, opts.pathLength, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign | x509.KeyUsageFlags.digitalSignature, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
      await x509.AuthorityKeyIdentifierExtension.create(parentCert.publicKey),
    ],
  });
  return { subject, certPem: cert.toString("pem") + "\n", keyPem: await privateKeyToPem(keys.privateKey) };
}

const ekuOf = (x509: typeof X509): Record<CertificateUsage, string[]> => ({
  server: [x509.ExtendedKeyUsage.serverAuth],
  client: [x509.ExtendedKeyUsage.clientAuth],
  both: [x509.ExtendedKeyUsage.serverAuth, x509.ExtendedKeyUsage.clientAuth],
});

export async function issueCertificate(opts: IssueCertificateOptions): Promise<CertKeyPem> {
  const x509 = await loadX509();
  const validity = opts.validity ?? defaultValidity();
  const caCert = new x509.X509Certificate(opts.ca.certPem);
  const [caKey, keys] = await Promise.all([importSigningKey(opts.ca.keyPem), generateKeyPair()]);
  const subject = new x509.Name([
    { CN: [opts.cn] },
    ...(opts.organizations ?? []).map((o) => ({ O: [o] })),
  ]).toString();
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: randomSerialHex(),
    subject,
    issuer: caCert.subject,
    notBefore: validity.notBefore,
    notAfter: validity.notAfter,
    signingAlgorithm: SIGNING_ALGORITHM,
    publicKey: keys.publicKey,
    signingKey: caKey,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      new x509.ExtendedKeyUsageExtension(ekuOf(x509)[opts.usages]),
      await x509.AuthorityKeyIdentifierExtension.create(caCert.publicKey),
      ...sanExtension(x509, opts.dnsNames, opts.ips),
    ],
  });
  return { certPem: cert.toString("pem") + "\n", keyPem: await privateKeyToPem(keys.privateKey) };
}

/** The SAN extension, or nothing when there are no names (an empty SAN is invalid DER per RFC 5280). */
function sanExtension(x509: typeof X509, dnsNames: string[] = [], ips: string[] = []): X509.Extension[] {
  const names = [
    ...dnsNames.map((value) => ({ type: "dns" as const, value })),
    ...ips.map((value) => ({ type: "ip" as const, value })),
  ];
  return names.length ? [new x509.SubjectAlternativeNameExtension(names)] : [];
}
