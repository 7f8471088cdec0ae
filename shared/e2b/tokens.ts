// Access tokens (docs/e2b.md "Access tokens"): a sandbox's envd access token is
// lowercase_hex(HMAC-SHA256(envd secret, claim token)). The e2b surface hands it out; the relay recomputes it and
// compares in constant time. No per-sandbox secret is stored anywhere (derivations are memoised in memory only).
import { createHash, createHmac, timingSafeEqual } from "node:crypto";

/** Memo bound for the two derivations below; when full it is cleared (a miss only costs one hash). */
const MEMO_MAX = 4096;

function memo(map: Map<string, string>, key: string, compute: () => string): string {
  let v = map.get(key);
  if (v === undefined) {
    v = compute();
    if (map.size >= MEMO_MAX) map.clear();
    map.set(key, v);
  }
  return v;
}

// One create derives the same token three times (the /init body, the reply, the in-process relay's owner entry);
// a relay owner-cache refill derives it again. Only ever filled from claim tokens read from nodes, never from
// client input, so a hit or miss tells a client nothing.
const derived = new Map<string, string>();

export function deriveAccessToken(envdSecret: string, claimToken: string): string {
  return memo(derived, `${envdSecret}\0${claimToken}`, () => createHmac("sha256", envdSecret).update(claimToken).digest("hex"));
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

const clientIds = new Map<string, string>();

/** An opaque, stable `clientID` for a node: tenants learn no topology from it. */
export function opaqueClientId(nodeName: string): string {
  // A list renders one per sandbox, over a handful of node names.
  return memo(clientIds, nodeName, () => createHash("sha256").update(`e2b-client\0${nodeName}`).digest("hex").slice(0, 16));
}
