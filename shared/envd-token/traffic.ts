// Public user ports (issue 20 part 3, docs/envd-relay.md "Public ports"): as on e2b cloud, a sandbox's user ports
// (every port but envd's 49983) are served without any token unless it was created with
// `network.allowPublicTraffic: false`; then the create reply's `trafficAccessToken` must come as the
// `e2b-traffic-access-token` header. The choice is stamped on the claim's metadata (a reserved key, so no caller
// can forge it), which the fleet view carries to every proxy; the traffic token is derived from the envd secret
// and the claim token like the envd access token, so a proxy checks it offline and nothing is stored.
import { createHmac } from "node:crypto";
import { safeEqual } from "./tokens.ts";

/** The claim metadata key carrying the create's choice: "true" (public user ports) or "false". */
export const PUBLIC_TRAFFIC_METADATA_KEY = "vk-sandbox.public-traffic";
export const TRAFFIC_TOKEN_HEADER = "e2b-traffic-access-token";
/** envd's own port: never public, always its access token. */
export const ENVD_PORT = 49983;

/** The fleet-wide policy: what a create without the field gets, and whether public ports are off altogether. */
export interface PublicTrafficPolicy {
  /** A create that does not say gets public user ports (e2b cloud's default). */
  defaultPublic: boolean;
  /** No user port is ever public (every one needs a token, as before issue 20): an operator's opt-out. */
  forbid: boolean;
}

export const E2B_CLOUD_PUBLIC_TRAFFIC: PublicTrafficPolicy = { defaultPublic: true, forbid: false };

/** The traffic token of a claim: hex HMAC-SHA256(envd secret, "e2b-traffic\0" + claim token). */
export function trafficAccessToken(envdSecret: string, claimToken: string): string {
  return createHmac("sha256", envdSecret).update(`e2b-traffic\0${claimToken}`).digest("hex");
}

export function trafficTokenMatches(envdSecret: string, claimToken: string, presented: string): boolean {
  return safeEqual(presented, trafficAccessToken(envdSecret, claimToken));
}

/**
 * Whether a create's user ports are public, from its `network.allowPublicTraffic` (undefined: not said) and the
 * policy; `refused` when the create asks for public ports the policy forbids (a 400 names the flag).
 */
export function decidePublicTraffic(requested: boolean | undefined, policy: PublicTrafficPolicy): { public: boolean } | { refused: string } {
  if (policy.forbid) {
    if (requested === true) return { refused: "network.allowPublicTraffic: true is refused: public sandbox ports are turned off on this deployment (--forbid-public-traffic)" };
    return { public: false };
  }
  return { public: requested ?? policy.defaultPublic };
}

/** The stamp read back from claim metadata: true, false, or undefined (no stamp: a claim made before issue 20). */
export function publicTrafficStamp(metadata: Record<string, string> | undefined): boolean | undefined {
  const v = metadata?.[PUBLIC_TRAFFIC_METADATA_KEY];
  return v === "true" ? true : v === "false" ? false : undefined;
}
