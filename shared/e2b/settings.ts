// What the e2b surface is configured with (settings), what the process hands it (deps), and the narrow seams its
// per-resource modules share: the events a change raises and the quota admission a start takes.
import type { Clock } from "../clock/index.ts";
import type { FleetSource } from "../fleet/index.ts";
import type { Logger } from "../log/index.ts";
import type { Registry } from "../metrics/index.ts";
import type { AliasTarget } from "./files.ts";
import type { QuotaLimits } from "./keys.ts";
import type { PublicTrafficPolicy } from "../envd-token/index.ts";
import type { NamespaceQuotas } from "./quotas.ts";

export interface E2bSettings {
  namespace: string;
  domain: string;
  envdVersion: string;
  defaultTimeoutSeconds: number;
  aliases: ReadonlyMap<string, AliasTarget>;
  envdSecret: string;
  rootToken: string;
  /** Per-namespace quotas from the key file; unset fields (and unset namespaces) take `defaultQuota`. */
  quotas?: ReadonlyMap<string, Partial<QuotaLimits>>;
  /** 0 = no limit; unset = no quotas. */
  defaultQuota?: QuotaLimits;
  /** Namespaces the key file names (reported on /metrics from the start). */
  namespaces?: Iterable<string>;
  /** Public user ports (shared/envd-token/traffic.ts); unset: e2b cloud's (public unless the create says otherwise). */
  publicTraffic?: PublicTrafficPolicy;
}

export interface E2bDeps {
  fleet: FleetSource;
  log: Logger;
  /** Called after a kill released a sandbox (the in-process proxy drops its cached owner at once). */
  onReleased?: (claimId: string) => void;
  /** Called when a sandbox was claimed and initialised (the in-process proxy learns its owner at once). */
  onClaimed?: (claimId: string, address: string, claimToken: string, namespace: string, publicTraffic: boolean) => void;
  clock?: Clock;
  /** Where the quota series register (the process's metrics registry); default: a registry of their own. */
  metricsRegistry?: Registry;
}

/** What a resource module reports after it changed a sandbox (the in-process proxy and the fleet view listen). */
export interface SandboxEvents {
  claimed(claimId: string, address: string, claimToken: string, namespace: string, publicTraffic: boolean): void;
  released(claimId: string): void;
  /** A node's state changed (no address: some node's): the fleet view re-reads it before its next tick. */
  changed(address?: string): void;
}

/** The quota admission a start (create, fork, resume) takes; the returned function settles the reservation. */
export type Admission = Pick<NamespaceQuotas, "admit">;

/** The events of a deps bag: its optional callbacks, and the fleet's `changed` hint. */
export function eventsOf(deps: Pick<E2bDeps, "fleet" | "onClaimed" | "onReleased">): SandboxEvents {
  return {
    claimed: (claimId, address, claimToken, namespace, publicTraffic) => deps.onClaimed?.(claimId, address, claimToken, namespace, publicTraffic),
    released: (claimId) => deps.onReleased?.(claimId),
    changed: (address) => deps.fleet.changed?.(address),
  };
}
