// Build slots (docs/e2b.md §6.1): at most --e2b-build-parallel builds run at once in this process, and one namespace
// at most its share, ceil(parallel / 2) (issue 17: one tenant must never starve another; a key holder holding every
// slot with `RUN sleep 1800` would). A start beyond either gets none and the route answers 429; the build stays
// `waiting`.

export type SlotRefusal = { kind: "busy" } | { kind: "namespace"; share: number };

/** Counts running builds, in all and per namespace. */
export class BuildSlots {
  private used = 0;
  private readonly byNs = new Map<string, number>();
  /** The most one namespace runs at once. */
  readonly share: number;

  constructor(private readonly parallel: number) {
    this.share = Math.max(1, Math.ceil(parallel / 2));
  }

  /** A release function, or why there is no slot. */
  tryAcquire(ns: string): (() => void) | SlotRefusal {
    const mine = this.byNs.get(ns) ?? 0;
    if (this.used >= this.parallel) return { kind: "busy" };
    if (mine >= this.share) return { kind: "namespace", share: this.share };
    this.used++;
    this.byNs.set(ns, mine + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.used--;
      const n = (this.byNs.get(ns) ?? 1) - 1;
      if (n > 0) this.byNs.set(ns, n);
      else this.byNs.delete(ns);
    };
  }

  get inUse(): number {
    return this.used;
  }

  inUseBy(ns: string): number {
    return this.byNs.get(ns) ?? 0;
  }
}
