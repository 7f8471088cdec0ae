// Key and PEM plumbing shared by the CA, the self-signed generator and the loader.
// Every key we mint is ECDSA P-256: it is what Go's crypto/tls, BoringSSL (Bun.serve) and kube-apiserver all accept
// without configuration, and it is cheap to generate (a test suite mints dozens).
// No X.509 library here: the self-signed path must not load one (der.ts); shared/x509 pins its crypto provider itself.
import { firstPemBlock, toPem as pemOf } from "./der.ts";

export const EC_ALGORITHM = { name: "ECDSA", namedCurve: "P-256" } as const;
export const SIGNING_ALGORITHM = { name: "ECDSA", hash: "SHA-256" } as const;

/** A certificate and its private key, both PEM: the cert as CERTIFICATE, the key as PKCS#8 PRIVATE KEY. */
export interface CertKeyPem {
  certPem: string;
  keyPem: string;
}

export function generateKeyPair(): Promise<CryptoKeyPair> {
  return crypto.subtle.generateKey(EC_ALGORITHM, true, ["sign", "verify"]) as Promise<CryptoKeyPair>;
}

export function toPem(der: ArrayBuffer | Uint8Array, label: string): string {
  return pemOf(der, label);
}

export async function privateKeyToPem(key: CryptoKey): Promise<string> {
  return toPem(await crypto.subtle.exportKey("pkcs8", key), "PRIVATE KEY");
}

export async function publicKeyToPem(key: CryptoKey): Promise<string> {
  return toPem(await crypto.subtle.exportKey("spki", key), "PUBLIC KEY");
}

/** Imports a PKCS#8 ECDSA P-256 key we minted ourselves (the CA's key when it signs a leaf). */
export function importSigningKey(keyPem: string): Promise<CryptoKey> {
  return crypto.subtle.importKey("pkcs8", firstPemBlock(keyPem), EC_ALGORITHM, false, ["sign"]);
}

/**
 * A random positive serial of 128 bits, as Go's tooling mints them (rand.Int below 2^128).
 * DER integers are signed, so a leading byte with the high bit set gets a 0x00 pad to stay positive.
 */
export function randomSerialHex(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  const hex = Buffer.from(bytes).toString("hex");
  return bytes[0]! >= 0x80 ? `00${hex}` : hex;
}

/** A bare key pair as PEM (PKCS#8 private, SPKI public), e.g. for service-account token signing. */
export async function generateKeyPairPem(): Promise<{ privateKeyPem: string; publicKeyPem: string }> {
  const keys = await generateKeyPair();
  const [privateKeyPem, publicKeyPem] = await Promise.all([
    privateKeyToPem(keys.privateKey),
    publicKeyToPem(keys.publicKey),
  ]);
  return { privateKeyPem, publicKeyPem };
}
