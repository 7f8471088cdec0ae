// Loads a certificate and key from disk and proves they belong together before anything listens with them:
// a mismatched pair otherwise surfaces much later as an opaque handshake failure on the client's side.
// node:crypto parses the pair, so loading one loads no X.509 library (idle RSS, see der.ts).
import { X509Certificate, createPrivateKey, createPublicKey } from "node:crypto";
import { readFileSync } from "node:fs";
import { firstPemBlock } from "./der.ts";
import type { CertKeyPem } from "./keys.ts";

export class KeyPairError extends Error {
  override readonly name = "KeyPairError";
  constructor(
    message: string,
    readonly context: { certPath: string; keyPath: string },
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

export interface LoadedKeyPair extends CertKeyPem {
  /** The leaf: the first certificate in the file (any that follow are its chain). */
  certificate: X509Certificate;
}

export function loadKeyPair(certPath: string, keyPath: string): LoadedKeyPair {
  const ctx = { certPath, keyPath };
  const certPem = readOrThrow(certPath, "certificate", ctx);
  const keyPem = readOrThrow(keyPath, "private key", ctx);
  let certificate: X509Certificate;
  try {
    certificate = new X509Certificate(Buffer.from(firstPemBlock(certPem)));
  } catch (cause) {
    throw new KeyPairError(`${certPath}: not a PEM certificate`, ctx, { cause });
  }
  let keySpki: Buffer;
  try {
    // node:crypto reads PKCS#8, SEC1 ("EC PRIVATE KEY") and PKCS#1 ("RSA PRIVATE KEY") alike; WebCrypto only PKCS#8.
    keySpki = createPublicKey(createPrivateKey(keyPem)).export({ type: "spki", format: "der" });
  } catch (cause) {
    throw new KeyPairError(`${keyPath}: not a PEM private key`, ctx, { cause });
  }
  const certSpki = certificate.publicKey.export({ type: "spki", format: "der" });
  if (!certSpki.equals(keySpki)) {
    throw new KeyPairError(
      `private key ${keyPath} does not match the public key of certificate ${certPath}`,
      ctx,
    );
  }
  return { certPem, keyPem, certificate };
}

function readOrThrow(path: string, what: string, ctx: { certPath: string; keyPath: string }): string {
  try {
    return readFileSync(path, "utf8");
  } catch (cause) {
    throw new KeyPairError(`cannot read ${what} ${path}: ${(cause as Error).message}`, ctx, { cause });
  }
}
