// The sandboxd-backed provider. Data path and verdict tables: ../docs/provider.md.
export { createSandboxProvider, SandboxProvider, type SandboxProviderHandle } from "./sandbox-provider.ts";
export type {
  SandboxClaimer,
  SandboxReleaser,
  SandboxLister,
  OwnerReader,
  OwnerLookup,
  OwnerTarget,
  OwnerObject,
  ProviderIntervals,
  SandboxProviderDeps,
} from "./types.ts";
export { DEFAULT_INTERVALS } from "./types.ts";
export { ProviderError, isProviderError, isSandboxdOutage, isTransientForHeldClaim, type ProviderErrorCode } from "./errors.ts";
export { pluralOf, ownerTargetOf, authorityOf } from "./ownership.ts";
export * from "./pod-contract.ts";
export { type SandboxReader } from "./types.ts";
