// sandboxd-sim — development substrate standing in for sandboxd (which needs KVM). Not product code.
//
// One simulated node's state: tokens, the claim table, pools, promoted templates, checkpoints, peers, guest
// upstreams for the ports relay, counters for /metrics, and the out-of-band knobs. HTTP lives elsewhere
// (http/server.ts, routes/); the verbs that create claims live in verbs.ts.
import { randomBytes } from "node:crypto";
import type { SimClock, Timer } from "./clock.ts";
import type { IdSource } from "./ids.ts";
import { TokenSet, type TenantConfig } from "./auth.ts";
import { ClaimTable, archiveClaim, wakeClaim, type ArchivedDeadlineStyle, type Claim } from "./claims.ts";
import { Pools } from "./pools.ts";
import type { Mesh } from "./mesh.ts";
import { unknownSandbox } from "./errors.ts";
import { DEFAULT_PREVIEW_ADVERTISE } from "./preview.ts";
import { GuestHost, type GuestHostOptions } from "./guest/index.ts";
import { DEFAULT_MAX_FORK_COUNT, SIZE_TIERS, poolKeyString, toWireTime, type InfoWire, type PoolKey, type TemplateInfo } from "#shared/sandboxd/index.ts";

export const REAP_INTERVAL_MS = 5_000;

export interface TemplateRec {
  key: PoolKey;
  contentDigest: string;
  tenant?: string;
  createdAt: number;
  labels: Record<string, string>;
  /** The sandbox it was promoted from (its guest's layer and envd defaults are captured: guest/captures.ts). */
  sourceId?: string;
}

export interface CheckpointRec {
  id: string;
  name?: string;
  sandboxId: string;
  key: PoolKey;
  tenant?: string;
  createdAt: number;
}

export interface GuestTarget {
  host: string;
  port: number;
}

export interface NodeOptions {
  addr: string;
  clock: SimClock;
  ids: IdSource;
  mesh: Mesh;
  rootToken?: string;
  tenants?: Record<string, TenantConfig>;
  maxClaims?: number;
  maxForkCount?: number;
  provisionLatencyMs?: number;
  refillConcurrency?: number;
  /** Whether the node has an egress attachment (net=egress claims and pools); default true. */
  egressAttachment?: boolean;
  /** The older index: `GET /v1/sandboxes` root-only with the short row (sandboxd.md §9.1). */
  legacyIndex?: boolean;
  archivedDeadline?: ArchivedDeadlineStyle;
  /** Host (or origin) of the preview listener minted URLs name; null = no preview listener (preview → 501). */
  previewAdvertise?: string | null;
  /**
   * Attach a guest agent (an envd-compatible process sandbox, guest/README.md) to every sandbox handed out.
   * Default off: the node then relays only to guests attached with attachGuest/attachFakeGuest.
   */
  guestAgents?: boolean | GuestHostOptions;
}

export class SimNode {
  addr: string;
  readonly clock: SimClock;
  readonly ids: IdSource;
  readonly mesh: Mesh;
  readonly tokens: TokenSet;
  readonly table = new ClaimTable();
  readonly pools: Pools;
  readonly templates = new Map<string, TemplateRec>();
  readonly checkpoints = new Map<string, CheckpointRec>();
  readonly guests = new Map<string, GuestTarget>();
  readonly counters = new Map<string, number>();
  peerAddrs: string[] = [];
  forced: { targets: string[]; requirePromoted: boolean } | null = null;
  maxClaims: number;
  maxForkCount: number;
  egressAttachment: boolean;
  legacyIndex: boolean;
  archivedDeadline: ArchivedDeadlineStyle;
  /** See NodeOptions.previewAdvertise; the setPreview knob changes it. */
  previewAdvertise: string | null;
  /** Signs preview tokens (per node: a URL is only readable by the node that minted it, as with distinct keys). */
  readonly previewSecret: string;
  /** False between stop and start (and during restart); peers skip a node that is down. */
  listening = false;
  /** The guest agents, when NodeOptions.guestAgents is set. */
  readonly guestHost: GuestHost | undefined;
  private reaper: Timer | undefined;

  constructor(o: NodeOptions) {
    this.addr = o.addr;
    this.clock = o.clock;
    this.ids = o.ids;
    this.mesh = o.mesh;
    this.tokens = new TokenSet(o.rootToken, o.tenants);
    this.maxClaims = o.maxClaims ?? 0;
    this.maxForkCount = o.maxForkCount ?? DEFAULT_MAX_FORK_COUNT;
    this.egressAttachment = o.egressAttachment ?? true;
    this.legacyIndex = o.legacyIndex ?? false;
    this.archivedDeadline = o.archivedDeadline ?? "omit";
    this.previewAdvertise = o.previewAdvertise === undefined ? DEFAULT_PREVIEW_ADVERTISE : o.previewAdvertise;
    // Not from the id source: a seeded run's ids must not shift because a node now also holds a key.
    this.previewSecret = randomBytes(16).toString("hex");
    this.guestHost = o.guestAgents ? new GuestHost({ clock: o.clock, ...(o.guestAgents === true ? {} : o.guestAgents) }) : undefined;
    this.pools = new Pools({ clock: o.clock, ids: o.ids, provisionLatencyMs: o.provisionLatencyMs ?? 0, refillConcurrency: o.refillConcurrency ?? 8 });
  }

  start(): void {
    this.reaper ??= this.clock.every(REAP_INTERVAL_MS, () => this.reapNow());
    this.pools.start();
    this.pools.refill();
  }
  stop(): void {
    this.reaper?.cancel();
    this.reaper = undefined;
    this.pools.stop();
  }

  count(name: string, by = 1): void {
    this.counters.set(name, (this.counters.get(name) ?? 0) + by);
  }

  get draining(): boolean {
    return this.pools.draining;
  }
  capacityState() {
    return { maxClaims: this.maxClaims, draining: this.pools.draining };
  }

  /** One reaper tick: strict now > deadline; destroy, or archive (on_expire "archive", or an archiving pool). */
  reapNow(): { reaped: string[]; archived: string[] } {
    // An archiving pool (archive_after_seconds set by PUT /v1/pools) archives a hibernated claim at its deadline.
    const r = this.table.reap(this.clock.now(), (key) => (this.pools.get(key)?.entry.archive_after_seconds ?? 0) > 0);
    this.count("reaps_total", r.reaped.length);
    this.count("archives_total", r.archived.length);
    this.syncGuests();
    return r;
  }

  /** Bring the guest agents in line with the claim table (guest/host.ts); a no-op without guest agents. */
  syncGuests(): void {
    this.guestHost?.sync(this.table.all(), this.checkpoints.values(), this.templates.values());
  }

  /** Sandbox-token data-plane access (ports relay, exec): a hibernated or archived sandbox wakes, activity is stamped. */
  wakeOnAccess(c: Claim): void {
    if (c.state !== "running") {
      if (c.state === "archived") this.count("unarchives_total");
      this.count("wakes_total");
    }
    wakeClaim(c, this.clock.now());
  }

  /** The claim, or the uniform 404 a caller would get. */
  mustGet(id: string): Claim {
    const c = this.table.get(id);
    if (!c) throw unknownSandbox();
    return c;
  }

  info(): InfoWire {
    const claimed = this.table.size;
    const hib = this.table.count((c) => c.state === "hibernated");
    const arch = this.table.count((c) => c.state === "archived");
    const failed = this.table.count((c) => c.state === "failed");
    const out: InfoWire = {
      pools: this.pools.status(),
      templates: [...this.templates.values()].map((t) => this.templateInfo(t)),
      claimed,
      advertise_addr: this.addr,
    };
    if (hib) out.hibernated = hib;
    if (arch) out.archived = arch;
    if (failed) out.failed = failed;
    if (this.pools.draining) out.draining = true;
    if (this.pools.atCapacityReason !== undefined) {
      out.at_capacity = true;
      out.at_capacity_reason = this.pools.atCapacityReason;
    }
    if (this.peerAddrs.length) out.peers = [...this.peerAddrs];
    return out;
  }

  templateInfo(t: TemplateRec): TemplateInfo {
    const tier = SIZE_TIERS[t.key.size];
    const out: TemplateInfo = {
      key: { ...t.key },
      content_digest: t.contentDigest,
      created_at: toWireTime(t.createdAt),
      cpu_count: tier.cpu_count,
      mem_total_bytes: tier.mem_total_bytes,
      labels: { ...t.labels },
    };
    if (t.tenant !== undefined) out.tenant = t.tenant;
    return out;
  }

  // ---- knobs: capacity and tokens ----------------------------------------------------------------------------

  setTokens(root: string | null | undefined, tenants: Record<string, TenantConfig> = {}): void {
    this.tokens.set(root, tenants);
  }
  setTenant(name: string, token: string, cap = 0): void {
    this.tokens.tenants.set(name, { token, max_claims: cap });
  }
  /** A removed tenant's token gets 401 at once; its claims run to their deadline but cannot extend. */
  removeTenant(name: string): void {
    this.tokens.tenants.delete(name);
  }
  drain(): void {
    this.pools.drain();
  }
  undrain(): void {
    this.pools.undrain();
  }
  atCapacity(reason: string | null | undefined): void {
    this.pools.atCapacityReason = reason ?? undefined;
    if (reason == null) this.pools.refill();
  }

  // ---- knobs: out-of-band node actions -------------------------------------------------------------------------

  /** Make the claim's deadline pass (now − 1 ms); the next reap tick acts on it. */
  expire(id: string): void {
    this.mustGet(id).deadline = this.clock.now() - 1;
  }
  hibernate(id: string): void {
    const c = this.mustGet(id);
    if (c.state === "running") c.state = "hibernated";
    this.syncGuests();
  }
  archive(id: string): void {
    archiveClaim(this.mustGet(id));
    this.count("archives_total");
    this.syncGuests();
  }
  failVmm(id: string, reason = "vmm exited"): void {
    const c = this.mustGet(id);
    c.state = "failed";
    c.failedReason = reason;
    this.syncGuests();
  }
  /** The sandbox disappears without a release (host crash, manual cleanup). */
  vanish(id: string): void {
    this.table.remove(id);
    this.syncGuests();
  }

  attachGuest(id: string, port: number, target: number | string): void {
    const [host, p] = typeof target === "number" ? ["127.0.0.1", target] : splitHostPort(target);
    this.guests.set(`${id}:${port}`, { host, port: p });
  }
  detachGuest(id: string, port: number): void {
    this.guests.delete(`${id}:${port}`);
  }

  /** Restart semantics: claims and the pool set survive; the drain flag clears; warm VMs are rebuilt. */
  restartState(): void {
    this.pools.restart();
  }

  templateFor(key: PoolKey): TemplateRec | undefined {
    return this.templates.get(poolKeyString(key));
  }
}

export function splitHostPort(s: string): [string, number] {
  const i = s.lastIndexOf(":");
  if (i < 0) throw new Error(`expected host:port, got ${JSON.stringify(s)}`);
  const host = s.slice(0, i).replace(/^\[|\]$/g, "") || "127.0.0.1";
  const port = Number(s.slice(i + 1));
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`bad port in ${JSON.stringify(s)}`);
  return [host, port];
}
