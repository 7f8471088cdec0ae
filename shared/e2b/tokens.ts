// e2b-only token helpers: the fork child's token hash and the opaque clientID. The access-token derivation itself is
// shared/envd-token's (the relay checks the same tokens); it is re-exported here for this folder's callers.
import { createHash } from "node:crypto";
import { memo } from "../envd-token/index.ts";

export { LANE_TAG_HEX, accessTokenMatches, carriesLaneTag, deriveAccessToken, envdAccessToken, laneTag, safeEqual } from "../envd-token/index.ts";

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
