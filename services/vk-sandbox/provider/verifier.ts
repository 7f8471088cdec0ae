// Startup quarantine and verification (§5.9). Every row loaded from disk is quarantined: it may be
// released, but it is not adopted, not reported Running, and not seen by the lease watch or the owner
// re-check until a successful sandboxd listing vouches for it. A listed row is unquarantined (backfilling a
// missing deadline); an unlisted one is dropped, since sandboxd no longer has the VM. A failed listing judges
// nothing, so a restart while sandboxd is down keeps every row for later.
//
// The same listing recovers claims sandboxd delivered before a crash but our table never recorded
// (recovery.ts). That is why creates are gated here too:
//
//   A create may claim for a key only once unrecorded claims for that key are ruled out, that is, once a
//   verification listing has succeeded since startup and it left no unrecorded claim of this node pending
//   under that key. Until then the create fails transient (sandboxd-unavailable) instead of claiming.
//
// Without the gate, a restart while sandboxd is down (the first listing fails) followed by sandboxd coming
// back would let the Pod's create claim a second sandbox before any listing could recover the first.
// A key stays pending while recovering its claim fails transiently (reading the token, sandboxd info) or
// while a claim for that key is in flight; a claim whose token cannot be read at all (no root token) is
// warned about once and left to the orphan audit, and no longer blocks the key.
import type { Core } from "./core.ts";
import { byId, listedDeadline } from "./listing.ts";
import { errorMessage } from "#shared/log/index.ts";
import { AddressOnce, recoverClaim, unrecordedClaims } from "./recovery.ts";

export class Verifier {
  private inflight: Promise<boolean> | undefined;
  private succeededOnce = false;
  /** The previous listing failed: sandboxd was unreachable, so waiting keys are retried on the next success. */
  private lastFailed = false;
  /** key -> ids of unrecorded claims of this node listed for it and not yet recorded (see the gate above). */
  private pending = new Map<string, Set<string>>();
  /** Unrecorded claims whose token cannot be read: warned about once, left to the orphan audit. */
  private readonly unrecoverable = new Set<string>();

  constructor(private readonly core: Core) {}

  /** True once a listing succeeded, nothing is quarantined and no recovery is pending: nothing left to do. */
  get finished(): boolean {
    return this.succeededOnce && this.core.st.quarantined.size === 0 && this.pending.size === 0;
  }

  /**
   * True when a create may claim for `key`: a listing has succeeded since startup and no unrecorded claim of
   * this node is pending under the key. The create checks this in the same turn it marks the key as claiming.
   */
  claimAllowed(key: string): boolean {
    return this.succeededOnce && !this.pending.has(key);
  }

  /**
   * One pass; resolves true when the listing succeeded. Concurrent callers share a pass: the quarantined set
   * only shrinks after startup, so a pass already running covers every key a caller could be waiting on.
   */
  verifyOnce(): Promise<boolean> {
    this.inflight ??= this.pass(true).finally(() => (this.inflight = undefined));
    return this.inflight;
  }

  /** The startup pass: the startup write that follows persists its result (and its failure is fatal). */
  verifyAtStartup(): Promise<boolean> {
    return this.pass(false);
  }

  /** Loop tick: returns true when the loop may stop. */
  async tick(): Promise<boolean> {
    if (this.finished) return true;
    await this.verifyOnce();
    return this.finished;
  }

  private async pass(persist: boolean): Promise<boolean> {
    const { st, log } = this.core;
    const snapshot = [...st.quarantined].flatMap((key) => {
      const c = st.claims.get(key);
      return c ? [[key, c.id] as const] : [];
    });
    let rows;
    try {
      rows = await this.core.lister.list();
    } catch (e) {
      log.warn(
        { err: errorMessage(e), quarantined: st.quarantined.size, pendingRecovery: this.pending.size },
        "claim verification: sandboxd listing failed; keeping every quarantined row",
      );
      this.lastFailed = true;
      return false;
    }
    const listing = byId(rows);
    let changed = false;
    // Keys to sync now rather than at their next backoff retry: every key this pass unquarantines, and, when
    // sandboxd was unreachable before this listing, every key whose create or delete failed meanwhile. After a
    // long outage a key's backoff can be minutes; the Pods must run on their claims within one pass.
    const retry = new Set<string>();
    if (this.lastFailed || !this.succeededOnce) {
      for (const k of st.waiting.keys()) retry.add(k);
      for (const k of st.deleteFailed) retry.add(k);
    }
    this.lastFailed = false;
    for (const [key, id] of snapshot) {
      if (!st.quarantined.has(key) || !st.holds(key, id)) continue;
      const row = listing.get(id);
      if (row) {
        const listed = listedDeadline(row);
        st.update(key, id, (c) => (c.deadline === 0 && listed !== 0 ? { ...c, deadline: listed } : c));
        st.quarantined.delete(key);
        changed = true;
        retry.add(key);
        log.info({ pod: key, claimId: id }, "claim verified by sandboxd listing");
      } else if (!st.tentative.has(key)) {
        st.drop(key, id);
        changed = true;
        log.warn({ pod: key, claimId: id }, "claim not listed by sandboxd; dropping the row");
      }
    }

    // Unrecorded claims of this node, after the quarantined rows are judged (a dropped row frees its key).
    // Pending is rebuilt from this listing in the same turn the listing arrived, before succeededOnce opens
    // the gate, so a create never sees the gate open while one of its key's claims is unrecorded.
    const found = unrecordedClaims(this.core, rows).filter((u) => !this.unrecoverable.has(u.row.id));
    this.pending = new Map();
    for (const u of found) {
      if (!u.key) continue;
      const ids = this.pending.get(u.key) ?? new Set<string>();
      ids.add(u.row.id);
      this.pending.set(u.key, ids);
    }
    this.succeededOnce = true;

    const address = new AddressOnce(this.core);
    for (const u of found) {
      const outcome = await recoverClaim(this.core, u, address);
      const ctx = { pod: u.key || undefined, claimId: u.row.id };
      switch (outcome.kind) {
        case "recorded":
          changed = true;
          log.warn(ctx, "claim verification: recovered a claim sandboxd delivered but the claims table never recorded");
          break;
        case "queued-for-release":
          changed = true;
          log.warn({ ...ctx, heldBy: outcome.heldBy }, "claim verification: unrecorded claim of this node; the key holds another claim, queued for release");
          break;
        case "resolved":
          log.debug({ ...ctx, why: outcome.why }, "claim verification: unrecorded claim needs no recovery");
          break;
        case "unrecoverable":
          this.unrecoverable.add(u.row.id);
          log.warn(
            { ...ctx, why: outcome.why },
            `claim verification: sandbox ${u.row.id} was claimed by this node but never recorded, and cannot be recovered; left to the orphan audit`,
          );
          break;
        case "retry":
          // In flight is the normal case of a create between its claim reply and its row: not worth a warning.
          log[outcome.inFlight ? "debug" : "warn"]({ ...ctx, why: outcome.why }, "claim verification: unrecorded claim of this node not recovered yet; the key stays blocked");
          continue;
      }
      this.settle(u.key, u.row.id);
    }

    // Dropped rows, backfilled deadlines and recovered claims are written once for the pass. Failure here is
    // only logged: the next writer carries the change, and releasing entries are released only once durable.
    // (The startup pass is persisted by the startup write that follows, whose failure is fatal.)
    if (changed && persist) await st.save().catch((e) => log.error({ err: errorMessage(e) }, "claims state write after verification failed"));
    for (const key of retry) this.core.retry(key);
    return true;
  }

  private settle(key: string, id: string): void {
    const ids = this.pending.get(key);
    if (!ids) return;
    ids.delete(id);
    if (ids.size === 0) this.pending.delete(key);
  }
}
