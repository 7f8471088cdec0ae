// Public user ports live in shared/envd-token/traffic.ts (the relay checks the traffic token too); the surface's
// modules and its index re-export them from here.
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
} from "../envd-token/index.ts";
