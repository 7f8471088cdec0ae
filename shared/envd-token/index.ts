// shared/envd-token — what the e2b surface (shared/e2b, which issues envd access tokens) and the envd relay
// (shared/relay, which checks them) both need, so the relay never imports the e2b surface:
//   tokens.ts  the access-token derivation (lane tag ‖ HMAC of the claim token), constant-time comparison
//   ids.ts     the sandbox id forms a token is bound to (claim id `sb_…` <-> public id `sb-…`)
// It imports nothing of ours (tests/unit/architecture/e2b-relay.test.ts).
export { LANE_TAG_HEX, accessTokenMatches, carriesLaneTag, deriveAccessToken, envdAccessToken, laneTag, memo, safeEqual } from "./tokens.ts";
export { claimIdOf, publicSandboxId, sameSandboxId } from "./ids.ts";
export {
  decidePublicTraffic,
  E2B_CLOUD_PUBLIC_TRAFFIC,
  ENVD_PORT,
  PUBLIC_TRAFFIC_METADATA_KEY,
  publicTrafficStamp,
  TRAFFIC_TOKEN_HEADER,
  trafficAccessToken,
  trafficTokenMatches,
  type PublicTrafficPolicy,
} from "./traffic.ts";
