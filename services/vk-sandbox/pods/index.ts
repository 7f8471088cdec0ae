// services/vk-sandbox/pods — the folder's front door: what other folders may import from it.
export { PodController } from "./controller.ts";
export { type PodSource, type PodWriter } from "./dependencies.ts";
export { type PodLifecycleProvider } from "./lifecycle-provider.ts";
