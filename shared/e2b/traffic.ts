// Public user ports live in shared/envd-token/traffic.ts (the relay checks the traffic token too).
export * from "../envd-token/traffic.ts";
