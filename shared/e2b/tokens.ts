// Access tokens (docs/e2b.md "Access tokens"): a sandbox's envd access token is
// lowercase_hex(HMAC-SHA256(envd secret, claim token)). The e2b surface hands it out; the relay recomputes it and
// compares in constant time. No per-sandbox secret is stored anywhere.
import { createHash, createHmac, timingSafeEqual } from "node:crypto";

export function deriveAccessToken(envdSecret: string, claimToken: string): string {
  return createHmac("sha256", envdSecret).update(claimToken).digest("hex");
}

/** Constant-time string equality (length leaks, content does not). */
export function safeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  if (x.length !== y.length) {
    // Compare anyway so a length mismatch costs the same as a content mismatch.
    timingSafeEqual(x, x);
    return false;
  }
  return timingSafeEqual(x, y);
}

/** The fork child's `accessTokenHash` instance-metadata value: hex sha512 of its access token. */
export function accessTokenHash(accessToken: string): string {
  return createHash("sha512").update(accessToken).digest("hex");
}

/** An opaque, stable `clientID` for a node: tenants learn no topology from it. */
export function opaqueClientId(nodeName: string): string {
  return createHash("sha256").update(`e2b-client\0${nodeName}`).digest("hex").slice(0, 16);
}
