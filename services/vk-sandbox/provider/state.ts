// The provider's in-memory state (§5.1) and the one path by which it reaches the disk.
//
// Mutations are serialised the JavaScript way: every change is a synchronous section between awaits, and any
// change made after an await re-checks that the key still holds the same claim id (the ID guard), because a
// create, a delete or a loop may have replaced the row meanwhile. Rows are immutable objects: a change
// replaces the row, so holding a reference never hides a concurrent change.
import type { V1Pod } from "@kubernetes/client-node";
import type { Claim, TableSnapshot } from "../claims/index.ts";
import type { ClaimsStore } from "../claims/index.ts";
import { ClaimRows } from "./claim-rows.ts";

/** A claim detached from its pod key, awaiting a confirmed release. */
export interface ReleasingEntry {
  claim: Claim;
  /**
   * True once a landed write contained this entry. Only durable entries are released: a release credential is
   * never acted on before it is on disk, so a crash between the move and the release cannot lose it.
   */
  durable: boolean;
}

export type OrphanVerdict = "orphan" | "external" | "stale";

export class ProviderState {
  /** key -> last accepted Pod (with the claim-id annotation once claimed). */
  readonly pods = new Map<string, V1Pod>();
  /** key -> claim. Includes tentative and quarantined rows. */
  readonly claims = new ClaimRows();
  /** Keys whose row's own write has not landed: never Running, never adopted, never in another's snapshot. */
  readonly tentative = new Set<string>();
  /** Keys loaded from disk and not yet confirmed by a listing: releasable, nothing else. */
  readonly quarantined = new Set<string>();
  releasing: ReleasingEntry[] = [];
  /**
   * Keys with a `POST /v1/claim` in flight. Between sandboxd delivering a claim and the create recording it,
   * the sandbox is listed but held by no row: recovery must not record it under the key meanwhile, or the
   * create's own row would replace the recovered one and lose its token (recovery.ts).
   */
  readonly claiming = new Set<string>();
  /**
   * Keys whose last create failed -> that Pod's UID: the Pod still waits for a sandbox. The orphan audit adopts a
   * claim of this node that landed after its request gave up only for such a Pod (orphan-audit.ts).
   */
  readonly waiting = new Map<string, string>();
  /** Keys whose last delete failed (a release that did not reach sandboxd): retried as soon as sandboxd answers. */
  readonly deleteFailed = new Set<string>();
  /** Preserved keys -> when to read the owner next and the current backoff. */
  readonly ownerRechecks = new Map<string, { next: number; delay: number }>();
  /** Claim id -> consecutive successful listings that lacked it (lease-watch.ts, lost sandboxes). */
  readonly missing = new Map<string, number>();
  /** Orphan-audit verdicts of the last successful scan, by sandbox id. */
  orphanVerdicts = new Map<string, OrphanVerdict>();

  constructor(private readonly store: ClaimsStore) {
    store.setSource((included) => this.snapshot(included));
  }

  /** Writes started so far (tests and benchmarks). */
  get writes(): number {
    return this.store.writes;
  }

  holds(key: string, id: string): boolean {
    return this.claims.get(key)?.id === id;
  }

  /** A row that is neither tentative nor quarantined. */
  settled(key: string): boolean {
    return this.claims.has(key) && !this.tentative.has(key) && !this.quarantined.has(key);
  }

  /** Replace the row only while the key still holds claim `id`. */
  update(key: string, id: string, change: (c: Claim) => Claim): boolean {
    const c = this.claims.get(key);
    if (!c || c.id !== id) return false;
    this.claims.set(key, change(c));
    return true;
  }

  /** Remove the row and every mark on the key, only while the key still holds claim `id`. */
  drop(key: string, id: string): boolean {
    if (!this.holds(key, id)) return false;
    this.claims.delete(key);
    this.tentative.delete(key);
    this.quarantined.delete(key);
    this.ownerRechecks.delete(key);
    return true;
  }

  /** Detach the row from its key onto the releasing list (ID-guarded). Persist it before releasing. */
  moveToReleasing(key: string, id: string): boolean {
    const c = this.claims.get(key);
    if (!c || c.id !== id) return false;
    this.drop(key, id);
    this.releasing.push({ claim: c, durable: false });
    return true;
  }

  /** Persist the table as it is when the write starts. */
  save(): Promise<void> {
    return this.store.commit();
  }

  /**
   * Persist the table including the tentative row with claim `id` (a fresh claim being committed). Resolves
   * only after a write that contains that row has landed; concurrent commits share writes.
   */
  commitRow(id: string): Promise<void> {
    return this.store.commit(id);
  }

  /** Resolves when no write is pending or running. */
  idle(): Promise<void> {
    return this.store.idle();
  }

  /**
   * What a write persists: every settled row, the tentative rows whose commit this batch serves, and the
   * releasing list. Taken synchronously when the batch starts, so nothing changes between snapshot and encode.
   */
  private snapshot(included: ReadonlySet<string>): { table: TableSnapshot; landed(): void } {
    // The tentative rows this batch does not serve stay out; the few it serves are settled once it lands.
    const committing: Array<readonly [string, string]> = [];
    const held: string[] = [];
    for (const key of this.tentative) {
      const c = this.claims.get(key);
      if (!c) continue;
      if (included.has(c.id)) committing.push([key, c.id]);
      else held.push(key);
    }
    const rows = this.claims.entriesExcept(held);
    const releasing = this.releasing.slice();
    return {
      table: { claims: rows, releasing: releasing.map((e) => e.claim) },
      // Settle the rows this write made durable before the next batch snapshots. Leaving it to the waiting
      // creates is too late: the group commit starts the next batch synchronously, and a row still marked
      // tentative would be left out of that newer file, which then replaces this one.
      landed: () => {
        for (const [key, id] of committing) if (this.holds(key, id)) this.tentative.delete(key);
        for (const e of releasing) e.durable = true;
      },
    };
  }
}
