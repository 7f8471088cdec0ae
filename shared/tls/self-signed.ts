// The self-signed serving certificate a daemon mints when it was given none (vk-sandbox's kubelet API does this:
// the apiserver reaches it with TLS verification off, so the cert only has to exist and name the node).
import * as x509 from "./x509.ts";
import { sanExtension } from "./ca.ts";
import { type CertKeyPem, SIGNING_ALGORITHM, generateKeyPair, privateKeyToPem, randomSerialHex } from "./keys.ts";
import { defaultValidity } from "./validity.ts";

export interface SelfSignedOptions {
  cn: string;
  dnsNames?: string[];
  ips?: string[];
}

/** ECDSA P-256, random 128-bit serial, now−1h…now+10y, KU digitalSignature, EKU serverAuth, not a CA. */
export async function selfSignedServingCert(opts: SelfSignedOptions): Promise<CertKeyPem> {
  const keys = await generateKeyPair();
  const validity = defaultValidity();
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: randomSerialHex(),
    name: new x509.Name([{ CN: [opts.cn] }]).toString(),
    notBefore: validity.notBefore,
    notAfter: validity.notAfter,
    signingAlgorithm: SIGNING_ALGORITHM,
    keys,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
      ...sanExtension(opts.dnsNames, opts.ips),
    ],
  });
  return { certPem: cert.toString("pem") + "\n", keyPem: await privateKeyToPem(keys.privateKey) };
}
