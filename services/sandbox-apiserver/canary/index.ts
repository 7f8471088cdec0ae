// services/sandbox-apiserver/canary — the folder's front door: the optional canary (docs/operations.md "Canary").
export { CANARY_SCRIPT, CANARY_TTL_SECONDS, Canary, type CanaryOptions, type CanaryOutcome } from "./canary.ts";
