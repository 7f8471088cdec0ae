// sandboxd-sim — development substrate standing in for sandboxd (which needs KVM). Not product code.
//
// One simulated node's state: tokens, the claim table, pools, promoted templates, checkpoints, peers, guest
// upstreams for the ports relay, counters for /metrics, and the out-of-band knobs. HTTP lives elsewhere
// (http/server.ts, routes/); the verbs that create claims live in verbs.ts.
import { randomBytes } from "node:crypto";
import type { SimClock, Timer } from "./clock.ts";
import type { IdSource } from "./ids.ts";
import { TokenSet, type TenantConfig } from "./auth.ts";
import { ClaimTable, archiveClaim, memUsedBytes, wakeClaim, type ArchivedDeadlineStyle, type Claim } from "./claims.ts";
import { IDLE_SWEEP_MS, idlePolicy, idleStep, type IdlePolicy } from "./idle.ts";
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

/** What the node's sandboxes hold in memory now (the `memory` knob): hibernated ones hold nothing. */
export interface MemoryReport {
  /** Σ mem_used_bytes over the node's claims: the memory their running VMs hold. */
  resident_bytes: number;
  sandboxes: { id: string; state: Claim["state"]; mem_total_bytes: number; mem_used_bytes: number }[];
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
  private idleSweeper: Timer | undefined;
  /** Wakes in flight by claim id: however many callers touch a sleeping sandbox at once, it wakes once. */
  private readonly wakes = new Map<string, Promise<void>>();
  /** The slowWake knob: how long (on the node's clock) a wake of a hibernated or archived sandbox takes. */
  wakeLatencyMs = 0;

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
    this.idleSweeper ??= this.clock.every(IDLE_SWEEP_MS, () => this.idleSweep());
    this.pools.start();
    this.pools.refill();
  }
  stop(): void {
    this.reaper?.cancel();
    this.reaper = undefined;
    this.idleSweeper?.cancel();
    this.idleSweeper = undefined;
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

  /**
   * One reaper tick: strict now > deadline; destroy, or archive (on_expire "archive", or an archiving pool); an
   * archive past its retention is deleted.
   */
  reapNow(): { reaped: string[]; archived: string[]; deleted: string[] } {
    // An archiving pool (archive_after_seconds set by PUT /v1/pools) archives a hibernated claim at its deadline.
    const r = this.table.reap(
      this.clock.now(),
      (key) => (this.pools.get(key)?.entry.archive_after_seconds ?? 0) > 0,
      (key) => this.policyOf(key).retentionMs,
    );
    this.count("reaps_total", r.reaped.length);
    this.count("archives_total", r.archived.length);
    this.count("archive_deletes_total", r.deleted.length);
    this.syncGuests();
    return r;
  }

  /** The idle policy of a key's pool as configured now (idle.ts); none for an unpooled key. */
  policyOf(key: Claim["key"]): IdlePolicy {
    return idlePolicy(this.pools.get(key)?.entry);
  }

  /** One idle sweep (idle.ts): hibernate running claims idle past their pool's idle time, archive hibernated ones. */
  idleSweep(): { hibernated: string[]; archived: string[] } {
    const now = this.clock.now();
    const out = { hibernated: [] as string[], archived: [] as string[] };
    // Most nodes set no idle policy at all: then the sweep costs one pass over the pools, not over every claim.
    if (!this.pools.all().some((p) => (p.entry.idle_hibernate_seconds ?? 0) > 0 || (p.entry.archive_after_seconds ?? 0) > 0)) return out;
    for (const c of this.table.all()) {
      const p = this.policyOf(c.key);
      const step = idleStep(c, p, now, this.wakes.has(c.id));
      if (step === "hibernate") {
        c.state = "hibernated";
        this.count("hibernates_total");
        out.hibernated.push(c.id);
      } else if (step === "archive") {
        archiveClaim(c, now, p.retentionMs);
        this.count("archives_total");
        out.archived.push(c.id);
      }
    }
    if (out.hibernated.length || out.archived.length) this.syncGuests();
    return out;
  }

  /** Whether a wake of this claim is in flight (slowWake). */
  waking(id: string): boolean {
    return this.wakes.has(id);
  }

  /** Bring the guest agents in line with the claim table (guest/host.ts); a no-op without guest agents. */
  syncGuests(): void {
    this.guestHost?.sync(this.table.all(), this.checkpoints.values(), this.templates.values());
  }

  /**
   * Wake a claim (the wake verb, or a sandbox-token data-plane access): hibernated keeps its deadline, archived gets
   * a fresh lease, failed cold-boots; a running one just has its activity stamped. With `wakeLatencyMs` a wake of
   * a hibernated or archived claim takes that long on the node's clock, and every caller meanwhile shares it: one
   * wake per sandbox. Resolves once the claim runs; throws the uniform 404 when it left the table meanwhile.
   * `access`: a sandbox-token data-plane access (stamps activity even on a running sandbox).
   */
  async wake(c: Claim, o: { access: boolean }): Promise<void> {
    const inFlight = this.wakes.get(c.id);
    if (inFlight) await inFlight;
    else if (c.state === "hibernated" || c.state === "archived") {
      const ms = this.wakeLatencyMs;
      const started = this.clock.monotonic();
      if (c.state === "archived") this.count("unarchives_total");
      this.count("wakes_total");
      const done = () => {
        this.wakes.delete(c.id);
        this.count("wake_seconds_total", (this.clock.monotonic() - started) / 1000);
        if (this.table.get(c.id) === c) wakeClaim(c, this.clock.now());
        this.syncGuests();
      };
      if (ms <= 0) done();
      else {
        const p = new Promise<void>((resolve) => this.clock.after(ms, () => (done(), resolve())));
        this.wakes.set(c.id, p);
        await p;
      }
    } else if (c.state === "failed") {
      this.count("wakes_total");
      wakeClaim(c, this.clock.now());
    }
    if (this.table.get(c.id) !== c) throw unknownSandbox();
    // A data-plane access is activity; the operator's wake verb on a running sandbox is not (a woken one starts
    // its idle time afresh either way: wakeClaim stamps it).
    if (o.access) c.lastActivity = this.clock.now();
  }

  /**
   * Hold the idle clock for an open data-plane connection or a running exec; the returned release (idempotent)
   * stamps activity, so the idle time counts from the close.
   */
  hold(c: Claim): () => void {
    c.holds = (c.holds ?? 0) + 1;
    c.lastActivity = this.clock.now();
    let held = true;
    return () => {
      if (!held) return;
      held = false;
      c.holds = Math.max(0, (c.holds ?? 1) - 1);
      c.lastActivity = this.clock.now();
    };
  }

  /** The memory the node's sandboxes hold now: a hibernated sandbox's is written out and freed. */
  memory(): MemoryReport {
    const sandboxes = this.table.all().map((c) => ({ id: c.id, state: c.state, mem_total_bytes: SIZE_TIERS[c.key.size].mem_total_bytes, mem_used_bytes: memUsedBytes(c) }));
    return { resident_bytes: sandboxes.reduce((n, s) => n + s.mem_used_bytes, 0), sandboxes };
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
    if (c.state === "running") {
      c.state = "hibernated";
      this.count("hibernates_total");
    }
    this.syncGuests();
  }
  archive(id: string): void {
    const c = this.mustGet(id);
    archiveClaim(c, this.clock.now(), this.policyOf(c.key).retentionMs);
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
  /** The agent relay's upstream (`GET …/agent`, routes/ports.ts): the simulator has no silkd of its own. */
  attachAgent(id: string, target: number | string): void {
    const [host, p] = typeof target === "number" ? ["127.0.0.1", target] : splitHostPort(target);
    this.guests.set(agentKey(id), { host, port: p });
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

/** Where `attachAgent` keeps a sandbox's agent upstream in SimNode.guests (ports are `<id>:<port>`). */
export const agentKey = (id: string) => `${id}:agent`;

export function splitHostPort(s: string): [string, number] {
  const i = s.lastIndexOf(":");
  if (i < 0) throw new Error(`expected host:port, got ${JSON.stringify(s)}`);
  const host = s.slice(0, i).replace(/^\[|\]$/g, "") || "127.0.0.1";
  const port = Number(s.slice(i + 1));
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`bad port in ${JSON.stringify(s)}`);
  return [host, port];
}
