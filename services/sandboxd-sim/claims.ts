// sandboxd-sim — development substrate standing in for sandboxd (which needs KVM). Not product code.
//
// The claim table and its state machine (sandboxd.md §6). One table answers every read and verb; `claimed`
// counts it in every state.
//
//   running ⇄ hibernated       hibernate; wake or sandbox-token data-plane access
//   running → hibernated        also by the idle clock (idle.ts): the pool's idle_hibernate_seconds without activity
//   hibernated/running → archived   on_expire:"archive" at the deadline, the idle clock's archive_after_seconds,
//                               or the archive knob; the deadline becomes the pool's archive retention (or none)
//   archived → gone             at the end of the retention (archive_delete_after_seconds), on a reap tick
//   archived → running          wake / access, with a fresh lease of the claim's granted length
//   failed (VMM down)           until wake cold-boots it (restarts + 1)
//   any → gone                  release (instant: the row vanishes at once) or reap (default on_expire)
//
// Expiry is strict: a claim expires when now > deadline, and only a reap tick (every 5 s) acts on it, so between
// the deadline and the next tick the claim is still live and answers verbs.
import { grantedTtlSeconds, SIZE_TIERS, toWireTime, GO_ZERO_TIME, type OnExpire, type PoolKey, type SandboxRow } from "#shared/sandboxd/index.ts";

export type ClaimState = "running" | "hibernated" | "archived" | "failed";

export interface Claim {
  id: string;
  token: string;
  key: PoolKey;
  tenant?: string;
  claimRef?: string;
  metadata?: Record<string, string>;
  onExpire: OnExpire;
  /** Whether on_expire was set explicitly (the row echoes it only then). */
  onExpireSet: boolean;
  grantedTtlSeconds: number;
  /** Lease end in ms; null = archived with no retention deadline. */
  deadline: number | null;
  /** First grant; never moves. */
  claimedAt: number;
  state: ClaimState;
  failedReason?: string;
  restarts: number;
  restartedAt?: number;
  fromCheckpoint?: string;
  /** The parent of a fork child (its guest starts as a copy of the parent's files). */
  forkedFrom?: string;
  templateDigest?: string;
  instanceMetadata?: Record<string, unknown>;
  /** Last sandbox-token data-plane activity (relay open or close, exec): the idle clock counts from here. */
  lastActivity: number;
  /** Data-plane relays and execs open now; while any is open the idle clock is held (idle.ts). */
  holds?: number;
}

/** How an archived-forever claim shows its deadline (sandboxd.md §9.3 leaves it open; clients must accept both). */
export type ArchivedDeadlineStyle = "omit" | "zero";

export class ClaimTable {
  private readonly claims = new Map<string, Claim>();

  get size(): number {
    return this.claims.size;
  }
  get(id: string): Claim | undefined {
    return this.claims.get(id);
  }
  all(): Claim[] {
    return [...this.claims.values()];
  }
  add(c: Claim): void {
    this.claims.set(c.id, c);
  }
  /** Release, reap and the out-of-band vanish knob all land here: the row is gone from every listing at once. */
  remove(id: string): boolean {
    return this.claims.delete(id);
  }
  count(pred: (c: Claim) => boolean = () => true): number {
    let n = 0;
    for (const c of this.claims.values()) if (pred(c)) n++;
    return n;
  }
  byToken(token: string): Claim | undefined {
    for (const c of this.claims.values()) if (c.token === token) return c;
    return undefined;
  }

  /**
   * One reap pass. Claims past their deadline (strictly) are destroyed, or archived when on_expire is "archive" or
   * when `archivingPool(key)` says the claim's pool archives and its VM is hibernated (sandboxd.md §6).
   * Returns what happened, for metrics and logs.
   */
  reap(
    now: number,
    archivingPool: (key: PoolKey) => boolean = () => false,
    retentionMs: (key: PoolKey) => number = () => 0,
  ): { reaped: string[]; archived: string[]; deleted: string[] } {
    const reaped: string[] = [];
    const archived: string[] = [];
    const deleted: string[] = [];
    for (const c of [...this.claims.values()]) {
      if (c.deadline === null || !(now > c.deadline)) continue;
      if (c.state === "archived") {
        // The archive's retention (archive_delete_after_seconds) is over: the archive and the claim are deleted.
        this.claims.delete(c.id);
        deleted.push(c.id);
        continue;
      }
      if (c.onExpire === "archive" || (c.state === "hibernated" && archivingPool(c.key))) {
        archiveClaim(c, now, retentionMs(c.key));
        archived.push(c.id);
      } else {
        this.claims.delete(c.id);
        reaped.push(c.id);
      }
    }
    return { reaped, archived, deleted };
  }
}

export function newLease(now: number, requestedTtl: number | undefined): { granted: number; deadline: number } {
  const granted = grantedTtlSeconds(requestedTtl);
  return { granted, deadline: now + granted * 1000 };
}

/** Archive: the lease ends; the deadline becomes the archive's retention (`retentionMs` > 0), else none (kept). */
export function archiveClaim(c: Claim, now = 0, retentionMs = 0): void {
  c.state = "archived";
  c.deadline = retentionMs > 0 ? now + retentionMs : null;
  c.failedReason = undefined;
}

/** Wake: hibernated keeps its deadline; archived restarts a fresh lease; failed cold-boots (restarts + 1). */
export function wakeClaim(c: Claim, now: number): void {
  if (c.state === "archived") {
    c.deadline = now + c.grantedTtlSeconds * 1000;
  } else if (c.state === "failed") {
    c.restarts += 1;
    c.restartedAt = now;
    c.failedReason = undefined;
  }
  c.state = "running";
  c.lastActivity = now;
}

/**
 * The memory a claim holds on the node: a fixed quarter of its size tier while its VM runs (deterministic, plainly
 * simulated); 0 once hibernated, archived or failed, because a hibernated VM's memory is written out and freed.
 */
export function memUsedBytes(c: Claim): number {
  return c.state === "running" ? Math.floor(SIZE_TIERS[c.key.size].mem_total_bytes / 4) : 0;
}

export interface RowOptions {
  legacy?: boolean;
  archivedDeadline?: ArchivedDeadlineStyle;
}

/** The §5.1 row, with its omission rules. Never carries the token. */
export function toRow(c: Claim, opts: RowOptions = {}): SandboxRow {
  const deadline = c.deadline === null ? (opts.archivedDeadline === "zero" ? GO_ZERO_TIME : undefined) : toWireTime(c.deadline);
  if (opts.legacy) {
    // The older index: {id,key,deadline,hibernated,from_checkpoint?} only (sandboxd.md §9.1).
    const row: SandboxRow = { id: c.id, key: { ...c.key }, hibernated: c.state === "hibernated" };
    if (deadline !== undefined) row.deadline = deadline;
    if (c.fromCheckpoint) row.from_checkpoint = c.fromCheckpoint;
    return row;
  }
  const tier = SIZE_TIERS[c.key.size];
  const row: SandboxRow = {
    id: c.id,
    key: { ...c.key },
    hibernated: c.state === "hibernated",
    cpu_count: tier.cpu_count,
    mem_total_bytes: tier.mem_total_bytes,
  };
  if (deadline !== undefined) row.deadline = deadline;
  if (c.tenant !== undefined) row.tenant = c.tenant;
  row.claimed_at = toWireTime(c.claimedAt);
  if (c.state === "archived") row.archived = true;
  if (c.fromCheckpoint) row.from_checkpoint = c.fromCheckpoint;
  if (c.claimRef) row.claim_ref = c.claimRef;
  if (c.metadata && Object.keys(c.metadata).length > 0) row.metadata = { ...c.metadata };
  if (c.onExpireSet) row.on_expire = c.onExpire;
  if (c.restarts > 0) row.restarts = c.restarts;
  if (c.restartedAt !== undefined) row.restarted_at = toWireTime(c.restartedAt);
  if (c.state === "failed") row.failed = c.failedReason || "vmm exited";
  return row;
}
