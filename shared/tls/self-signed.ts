// The self-signed serving certificate a daemon mints when it was given none (vk-sandbox's kubelet API does this:
// the apiserver reaches it with TLS verification off, so the cert only has to exist and name the node).
// Encoded with der.ts and signed with WebCrypto, so minting one loads no X.509 library (idle RSS, see der.ts).
import * as der from "./der.ts";
import { type CertKeyPem, SIGNING_ALGORITHM, generateKeyPair, privateKeyToPem, randomSerialHex } from "./keys.ts";
import { defaultValidity } from "./validity.ts";

export interface SelfSignedOptions {
  cn: string;
  dnsNames?: string[];
  ips?: string[];
}

const OID = {
  ecdsaWithSha256: "1.2.840.10045.4.3.2",
  commonName: "2.5.4.3",
  basicConstraints: "2.5.29.19",
  keyUsage: "2.5.29.15",
  extKeyUsage: "2.5.29.37",
  subjectAltName: "2.5.29.17",
  serverAuth: "1.3.6.1.5.5.7.3.1",
};

function extension(id: string, critical: boolean, value: Uint8Array): Uint8Array {
  return der.sequence(der.oid(id), ...(critical ? [der.booleanTrue()] : []), der.octetString(value));
}

/** ECDSA P-256, random 128-bit serial, now−1h…now+10y, KU digitalSignature, EKU serverAuth, not a CA. */
export async function selfSignedServingCert(opts: SelfSignedOptions): Promise<CertKeyPem> {
  const keys = await generateKeyPair();
  const validity = defaultValidity();
  const name = der.sequence(der.set(der.sequence(der.oid(OID.commonName), der.utf8String(opts.cn))));
  const sigAlg = der.sequence(der.oid(OID.ecdsaWithSha256));
  const sans = [
    ...(opts.dnsNames ?? []).map((d) => der.implicitPrimitive(2, Buffer.from(d, "ascii"))),
    ...(opts.ips ?? []).map((ip) => der.implicitPrimitive(7, der.ipBytes(ip))),
  ];
  const extensions = [
    extension(OID.basicConstraints, true, der.sequence()), // cA defaults to false
    extension(OID.keyUsage, true, der.bitString(Uint8Array.of(0x80), 7)), // digitalSignature (bit 0)
    extension(OID.extKeyUsage, false, der.sequence(der.oid(OID.serverAuth))),
    // An empty SAN is invalid DER (RFC 5280): left out when there are no names.
    ...(sans.length ? [extension(OID.subjectAltName, false, der.sequence(...sans))] : []),
  ];
  const tbs = der.sequence(
    der.explicit(0, der.smallInteger(2)), // v3
    der.unsignedInteger(Buffer.from(randomSerialHex(), "hex")),
    sigAlg,
    name,
    der.sequence(der.time(validity.notBefore), der.time(validity.notAfter)),
    name,
    new Uint8Array(await crypto.subtle.exportKey("spki", keys.publicKey)),
    der.explicit(3, der.sequence(...extensions)),
  );
  const signature = new Uint8Array(await crypto.subtle.sign(SIGNING_ALGORITHM, keys.privateKey, tbs));
  const cert = der.sequence(tbs, sigAlg, der.bitString(der.ecdsaSignatureToDer(signature)));
  return { certPem: der.toPem(cert, "CERTIFICATE"), keyPem: await privateKeyToPem(keys.privateKey) };
}
