// The provider's claims by pod key: a Map that also keeps its entries in an array, in the Map's own order, so the
// snapshot every claims-table write takes copies an array instead of walking the Map. Under a stream of claims
// there is about one write per two Pods, and at 10,000 rows walking the Map for each was a fifth of the daemon's
// CPU (docs/performance.md, Throughput).
import type { Claim } from "../claims/index.ts";

export type ClaimEntry = readonly [string, Claim];

export class ClaimRows extends Map<string, Claim> {
  /** Entries in insertion order; a deleted key leaves a hole until the next compaction. */
  private slots: Array<ClaimEntry | undefined> = [];
  private readonly slotOf = new Map<string, number>();
  private holes = 0;

  constructor() {
    // No initial entries: Map's constructor would call set() before the fields above exist.
    super();
  }

  override set(key: string, claim: Claim): this {
    super.set(key, claim);
    const i = this.slotOf.get(key);
    if (i !== undefined) this.slots[i] = [key, claim];
    else {
      this.slotOf.set(key, this.slots.length);
      this.slots.push([key, claim]);
    }
    return this;
  }

  override delete(key: string): boolean {
    const i = this.slotOf.get(key);
    if (i !== undefined) {
      this.slots[i] = undefined;
      this.slotOf.delete(key);
      this.holes++;
    }
    return super.delete(key);
  }

  override clear(): void {
    super.clear();
    this.slots = [];
    this.slotOf.clear();
    this.holes = 0;
  }

  /**
   * Every entry in the Map's order, leaving out the keys in `skip` (few: the tentative rows a write holds back).
   * A fresh array the caller may keep.
   */
  entriesExcept(skip: Iterable<string>): ClaimEntry[] {
    if (this.holes > 0) this.compact();
    const cut: number[] = [];
    for (const key of skip) {
      const i = this.slotOf.get(key);
      if (i !== undefined) cut.push(i);
    }
    const out = this.slots.slice() as ClaimEntry[];
    cut.sort((a, b) => b - a);
    for (const i of cut) out.splice(i, 1);
    return out;
  }

  /** Drops the holes deleted keys left and renumbers the keys after them. */
  private compact(): void {
    const kept: ClaimEntry[] = [];
    for (const e of this.slots) {
      if (!e) continue;
      if (kept.length !== this.slotOf.get(e[0])) this.slotOf.set(e[0], kept.length);
      kept.push(e);
    }
    this.slots = kept;
    this.holes = 0;
  }
}
