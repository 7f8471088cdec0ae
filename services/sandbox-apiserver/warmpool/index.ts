// services/sandbox-apiserver/warmpool — the folder's front door: what other folders may import from it.
export { type WarmPoolDriverHandle, startWarmPoolDriver } from "./run.ts";
export { AUTOSCALE_DEFAULTS, type AutoscaleParams } from "./autoscale.ts";
