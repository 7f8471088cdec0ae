// Access tokens (docs/e2b.md "Access tokens"), shared by the e2b surface (which issues them) and the envd relay
// (which checks them), so neither imports the other for it. A sandbox's envd access token is
//   lane tag ‖ lowercase_hex(HMAC-SHA256(envd secret, claim token))
// where the lane tag is the first 32 hex digits of HMAC-SHA256(envd secret, "e2b-lane\0" + claim id). The e2b
// surface hands it out; the relay recomputes it and compares in constant time. The tag lets a proxy that shares the
// secret tell, with no node read, that a token was issued for that id (docs/envd-relay.md "Probe lanes"). Tokens of
// sandboxes made before the tag existed (the bare 64-digit HMAC) are still accepted. No per-sandbox secret is stored
// anywhere (derivations are memoised in memory only).
import { createHmac, timingSafeEqual } from "node:crypto";

/** Memo bound for the derivations memoised here and in shared/e2b/tokens.ts; when full it is cleared (a miss costs one hash). */
const MEMO_MAX = 4096;

export function memo(map: Map<string, string>, key: string, compute: () => string): string {
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

export const LANE_TAG_HEX = 32;

/**
 * The lane tag of a claim id: proof, checkable offline with the secret, that a token was issued for this id. Not
 * memoised: the relay computes it for ids clients send, and a memo hit would tell them which ids were seen.
 */
export function laneTag(envdSecret: string, claimId: string): string {
  return createHmac("sha256", envdSecret).update(`e2b-lane\0${claimId}`).digest("hex").slice(0, LANE_TAG_HEX);
}

// One create asks for the tagged token three times (the /init body, the reply, the in-process relay's owner entry):
// memoised like `derived`, and keyed by the claim token too, so only claims read from nodes ever fill it (laneTag
// itself stays unmemoised for the ids clients send).
const tagged = new Map<string, string>();

/** The envd access token the surface hands out (and envd is initialised with) for a claim. */
export function envdAccessToken(envdSecret: string, claimId: string, claimToken: string): string {
  return memo(tagged, `${envdSecret}\0${claimId}\0${claimToken}`, () => laneTag(envdSecret, claimId) + deriveAccessToken(envdSecret, claimToken));
}

/** Whether a presented token carries the lane tag of `claimId` (constant time; says nothing of the claim token). */
export function carriesLaneTag(envdSecret: string, claimId: string, presented: string): boolean {
  if (presented.length !== LANE_TAG_HEX + 64) return false;
  return safeEqual(presented.slice(0, LANE_TAG_HEX), laneTag(envdSecret, claimId));
}

/**
 * Whether `presented` is a valid access token of the claim: the tagged form, or the untagged one of sandboxes made
 * before tags (their envd was initialised with it, so the relay must keep admitting it).
 */
export function accessTokenMatches(envdSecret: string, claimId: string, claimToken: string, presented: string): boolean {
  const untagged = deriveAccessToken(envdSecret, claimToken);
  if (presented.length === LANE_TAG_HEX + 64) return safeEqual(presented, laneTag(envdSecret, claimId) + untagged);
  return safeEqual(presented, untagged);
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
