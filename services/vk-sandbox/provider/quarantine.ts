// Startup quarantine and verification (spec §5.9). Every row loaded from disk is quarantined: it may be
// released, but it is not adopted, not reported Running, and not seen by the lease watch or the owner
// re-check until a successful sandboxd listing vouches for it. A listed row is unquarantined (backfilling a
// missing deadline); an unlisted one is dropped, since sandboxd no longer has the VM. A failed listing judges
// nothing, so a restart while sandboxd is down keeps every row for later.
import type { Core } from "./core.ts";
import { byId, listedDeadline } from "./listing.ts";
import { messageOf } from "./errors.ts";

export class Verifier {
  private inflight: Promise<boolean> | undefined;
  private succeededOnce = false;

  constructor(private readonly core: Core) {}

  /** True once a listing succeeded and nothing is quarantined: the loop has nothing left to do. */
  get finished(): boolean {
    return this.succeededOnce && this.core.st.quarantined.size === 0;
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
    let listing;
    try {
      listing = byId(await this.core.lister.list());
    } catch (e) {
      log.warn({ err: messageOf(e), quarantined: st.quarantined.size }, "claim verification: sandboxd listing failed; keeping every quarantined row");
      return false;
    }
    this.succeededOnce = true;
    let changed = false;
    for (const [key, id] of snapshot) {
      if (!st.quarantined.has(key) || !st.holds(key, id)) continue;
      const row = listing.get(id);
      if (row) {
        const listed = listedDeadline(row);
        st.update(key, id, (c) => (c.deadline === 0 && listed !== 0 ? { ...c, deadline: listed } : c));
        st.quarantined.delete(key);
        changed = true;
        log.info({ pod: key, claimId: id }, "claim verified by sandboxd listing");
      } else if (!st.tentative.has(key)) {
        st.drop(key, id);
        changed = true;
        log.warn({ pod: key, claimId: id }, "claim not listed by sandboxd; dropping the row");
      }
    }
    // Dropped rows and backfilled deadlines are not spec'd writers; saving them is harmless and keeps the file
    // close to memory. Failure here is only logged: the next writer carries the change.
    if (changed && persist) await st.save().catch((e) => log.error({ err: messageOf(e) }, "claims state write after verification failed"));
    return true;
  }
}
