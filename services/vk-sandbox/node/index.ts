export { CONDITION_TYPES, type NodeSpecInput, PROVIDER_TAINT, buildNode, nodeLabels, nodeStatus } from "./node-object.ts";
export { DEFAULT_STATUS_INTERVAL_MS, NodeController, type NodeControllerOptions, type NodeKubeClient, type NodeRef } from "./node-controller.ts";
export {
  DEFAULT_RENEW_INTERVAL_MS,
  LEASE_DURATION_SECONDS,
  LEASE_NAMESPACE,
  LeaseController,
  type LeaseControllerOptions,
  type LeaseKubeClient,
} from "./lease-controller.ts";
export { LAST_APPLIED_META, LAST_APPLIED_STATUS } from "./status-patch.ts";
