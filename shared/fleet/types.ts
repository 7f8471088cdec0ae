// The fleet view (docs/fleet.md): what the e2b surface and the envd relay need to know about the nodes, behind one
// interface with two sources — sandboxd seeds polled directly (mesh.ts, sandbox-e2b) and the Kubernetes
// NodeInventory informer (sandbox-apiserver, sandbox-envd-proxy). Consumers see only FleetSource snapshots and the
// helpers of view.ts; neither knows which source fed them.
import type { Net, PoolKey, Size } from "../sandboxd/index.ts";

/** A warm pool a node advertises. `net`/`size` are already defaulted (`none`/`small`). */
export interface FleetPool {
  template: string;
  net: Net;
  size: Size;
  /** Claim-ready VMs right now (as of the node's last report). */
  warm: number;
  target: number;
}

/** A promoted template a node holds (sandboxd `/v1/info` templates; NodeInventory `templates[]`). */
export interface FleetTemplate {
  template: string;
  net: Net;
  size: Size;
  contentDigest?: string;
  /** Epoch ms. */
  createdAt?: number;
  labels?: Record<string, string>;
}

/** One claimed sandbox as the fleet last saw it (an inventory entry, or a row of the node's own listing). */
export interface FleetEntry {
  /** The raw sandboxd claim id (`sb_…`). */
  id: string;
  /** The claim_ref (`<namespace>/<name>`), or the id when the claim has none. */
  name: string;
  /** From `name`: the part before the first `/`; `default` when there is no slash. */
  namespace: string;
  phase: "Running" | "Hibernated";
  /** Pool image (template ref) of the claim's key, when known. */
  template?: string;
  net?: Net;
  size?: Size;
  /** Epoch ms; undefined when unknown or "no deadline". */
  deadline?: number;
  claimedAt?: number;
  metadata?: Record<string, string>;
  cpuCount?: number;
  memoryBytes?: number;
}

/** One node: a sandboxd the fleet can call. */
export interface FleetNode {
  /**
   * Stable identity: the Kubernetes node name (inventory source) or the sandboxd `advertise_addr` (mesh source).
   * Never shown to tenants (the e2b `clientID` is an opaque hash of it).
   */
  name: string;
  /** `host:port` (or an origin) of the node's sandboxd; empty when the inventory carries none (unusable). */
  address: string;
  /** Epoch ms of the report this snapshot came from; undefined when the source had no stamp. */
  publishedAt?: number;
  pools: FleetPool[];
  templates: FleetTemplate[];
  entries: FleetEntry[];
}

/**
 * A source of fleet snapshots. `nodes()` returns only FRESH nodes: each source applies its own staleness rule
 * (inventory: `--inventory-stale-after` against the fleet's newest `publishedAt`, see freshNodes in view.ts; mesh:
 * a silent node keeps its snapshot for 3 poll ticks, then leaves). Snapshots are immutable; callers may hold one.
 */
export interface FleetSource {
  /** The current fresh nodes, sorted by name. Cheap: no I/O. */
  nodes(): readonly FleetNode[];
  /** Resolves once the first full snapshot is in; rejects when it cannot be (the message names why). */
  ready(signal?: AbortSignal): Promise<void>;
  /**
   * A hint that the fleet changed through us (a claim, release, pause) on the node at `address` (any node when
   * absent): a source that polls MAY refresh that node early. Correctness never depends on it — the e2b surface and
   * the relay fall back to live node reads.
   */
  changed?(address?: string): void;
  /** Nodes the source knows but leaves out as stale (the capacity answer counts them), when it can tell. */
  staleCount?(): number;
  /** Claim rate and refill time per pool key, measured from this source's snapshots (demand.ts), when it measures. */
  readonly demand?: DemandReader;
  stop(): Promise<void>;
}

export interface DemandReading {
  claimsPerSecond: number;
  /** The median of the recent refill samples, undefined before the first one. */
  refillMs: number | undefined;
  refillSamples: number;
}

export interface DemandReader {
  read(key: PoolKey): DemandReading;
  /** A create of the key nobody could serve: demand the pool's own snapshots cannot show (demand.ts). */
  recordMiss?(key: PoolKey): void;
  /** A claim this process made, counted now and deduplicated by id against the snapshots (demand.ts). */
  recordClaim?(key: PoolKey, id: string, node?: string): void;
}
