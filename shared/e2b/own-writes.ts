// Read your own writes (docs/e2b.md "Read your own writes", issue 20 part 2): the fleet snapshot lags a create,
// kill, pause or resume by a poll tick or an inventory publish, and agents list or kill right after one. This
// replica keeps its own recent writes and lays them over the snapshot for the namespace's list, get and kill: a
// created sandbox is listed at once, a killed one is gone (a second kill or get is 404 without a node call), a
// paused or resumed one shows its new state. An overlay entry is dropped as soon as the snapshot shows the same
// state, and after OWN_WRITE_MS in any case (a sandbox that changed again elsewhere is then the snapshot's word).
// Other replicas see the change within one publish, as before. Writes are kept per namespace, each bounded on its
// own: one tenant's create -> kill flood evicts only its own writes, and a list walks only its own namespace's.
import type { Clock } from "../clock/index.ts";
import type { FleetNode } from "../fleet/index.ts";
import { claimIdOf } from "./ids.ts";
import { entriesIn } from "./nodes.ts";

/** How long an own write overrides the snapshot when the snapshot never shows it (a publish or two). */
export const OWN_WRITE_MS = 60_000;
/** Bound on one namespace's remembered writes (a create burst of one replica); its own oldest go first. */
export const OWN_WRITES_PER_NAMESPACE = 2_048;
/**
 * Bound on remembered writes in all (namespaces come from the key file): over it, the namespace that holds the most
 * loses its oldest, never a namespace under its share.
 */
export const OWN_WRITES_MAX = 20_000;

/** What a list renders for one sandbox (Renderer.listed's input). */
export interface ListedRow {
  claimId: string;
  nodeName: string;
  template: string;
  claimedAt: number | undefined;
  deadline: number | undefined;
  paused: boolean;
  cpuCount: number | undefined;
  memoryBytes: number | undefined;
  metadata: Record<string, string> | undefined;
}

/**
 * `changed`: a created sandbox this replica also paused or resumed before the snapshot listed it (the snapshot may
 * then show the state before that verb, so the overlay keeps its word until the snapshot agrees).
 */
type Write =
  | { kind: "created"; row: ListedRow; until: number; changed?: boolean }
  | { kind: "killed"; until: number }
  | { kind: "paused" | "resumed"; until: number };

interface NamespaceWrites {
  /** claim id -> the latest write of this replica; Map order = insertion order (oldest first). */
  writes: Map<string, Write>;
  /** Writes over the bound left before the next sweep of expired entries (the first one sweeps at once). */
  untilSweep: number;
}

export class OwnWrites {
  private readonly byNs = new Map<string, NamespaceWrites>();
  private total = 0;

  constructor(private readonly clock: Clock) {}

  created(ns: string, row: ListedRow): void {
    // A sandbox that ends before the snapshot shows it must not be listed until OWN_WRITE_MS.
    const until = Math.min(this.clock.now() + OWN_WRITE_MS, row.deadline ?? Infinity);
    this.put(ns, row.claimId, { kind: "created", row, until });
  }

  killed(ns: string, claimId: string): void {
    this.put(ns, claimId, { kind: "killed", until: this.clock.now() + OWN_WRITE_MS });
  }

  paused(ns: string, claimId: string): void {
    this.put(ns, claimId, { kind: "paused", until: this.clock.now() + OWN_WRITE_MS });
  }

  resumed(ns: string, claimId: string): void {
    this.put(ns, claimId, { kind: "resumed", until: this.clock.now() + OWN_WRITE_MS });
  }

  /** Whether this replica killed the sandbox (either id spelling) within OWN_WRITE_MS. */
  isKilled(ns: string, id: string): boolean {
    return this.current(ns, claimIdOf(id))?.kind === "killed";
  }

  /** The namespace's sandboxes: the snapshot's entries with this replica's writes laid over them. */
  rows(nodes: readonly FleetNode[], ns: string): ListedRow[] {
    const out: ListedRow[] = [];
    const seen = new Set<string>();
    const mine = this.byNs.get(ns);
    for (const { node, entry } of entriesIn(nodes, ns)) {
      seen.add(entry.id);
      const w = mine ? this.current(ns, entry.id) : undefined;
      const paused = entry.phase === "Hibernated";
      const row: ListedRow = {
        claimId: entry.id,
        nodeName: node.name,
        template: entry.template ?? "",
        claimedAt: entry.claimedAt,
        deadline: entry.deadline,
        paused,
        cpuCount: entry.cpuCount,
        memoryBytes: entry.memoryBytes,
        metadata: entry.metadata,
      };
      if (!w) out.push(row);
      else if (w.kind !== "killed") {
        // A create the snapshot lists is the snapshot's word at once, whatever state it shows: the sandbox can only
        // have left the running state it was created in since then (its node put it to sleep: an idle pool,
        // services/sandboxd-sim/docs/sleep.md; or its timeout paused it), never be shown from before the create.
        const want = w.kind === "created" ? (w.changed ? w.row.paused : paused) : w.kind === "paused";
        // The snapshot shows this write: it is the snapshot's word from now on.
        if (want === paused) this.remove(ns, entry.id);
        out.push(want === paused ? row : { ...row, paused: want });
      }
      // killed: left out until the snapshot drops it.
    }
    if (!mine) return out;
    for (const [claimId, w] of mine.writes) {
      if (seen.has(claimId)) continue;
      if (w.until <= this.clock.now()) this.remove(ns, claimId);
      // Killed and no longer listed: the snapshot caught up.
      else if (w.kind === "killed") this.remove(ns, claimId);
      else if (w.kind === "created") out.push(w.row);
    }
    return out;
  }

  /** Writes held, in all and for one namespace (tests and bounds). */
  size(ns?: string): number {
    return ns === undefined ? this.total : (this.byNs.get(ns)?.writes.size ?? 0);
  }

  private current(ns: string, claimId: string): Write | undefined {
    const w = this.byNs.get(ns)?.writes.get(claimId);
    if (w && w.until <= this.clock.now()) {
      this.remove(ns, claimId);
      return undefined;
    }
    return w;
  }

  private remove(ns: string, claimId: string): void {
    const mine = this.byNs.get(ns);
    if (!mine?.writes.delete(claimId)) return;
    this.total--;
    if (mine.writes.size === 0) this.byNs.delete(ns);
  }

  private put(ns: string, claimId: string, w: Write): void {
    let mine = this.byNs.get(ns);
    if (!mine) this.byNs.set(ns, (mine = { writes: new Map(), untilSweep: 0 }));
    const prev = mine.writes.get(claimId);
    if (prev) mine.writes.delete(claimId);
    else this.total++;
    // A pause or resume of a sandbox created here and not listed yet changes the created row itself.
    if (prev?.kind === "created" && (w.kind === "paused" || w.kind === "resumed")) {
      mine.writes.set(claimId, { kind: "created", row: { ...prev.row, paused: w.kind === "paused" }, until: prev.until, changed: true });
    } else mine.writes.set(claimId, w);
    if (mine.writes.size > OWN_WRITES_PER_NAMESPACE) this.shrink(ns, mine, OWN_WRITES_PER_NAMESPACE);
    if (this.total > OWN_WRITES_MAX) {
      // The namespace holding the most gives way (namespaces are few: the key file's).
      let largest = ns;
      for (const [name, n] of this.byNs) if (n.writes.size > (this.byNs.get(largest)?.writes.size ?? 0)) largest = name;
      const l = this.byNs.get(largest)!;
      this.shrink(largest, l, l.writes.size - (this.total - OWN_WRITES_MAX));
    }
  }

  /**
   * Down to `max` writes: expired ones first (swept at most once per thousand writes over the bound: a pass over the
   * whole map on every write ran once a create -> kill flood had filled it), then the oldest (Map order is write order).
   */
  private shrink(ns: string, mine: NamespaceWrites, max: number): void {
    if (mine.untilSweep-- <= 0) {
      mine.untilSweep = 1000;
      const now = this.clock.now();
      for (const [k, v] of mine.writes) if (v.until <= now) this.remove(ns, k);
    }
    while (mine.writes.size > max) this.remove(ns, mine.writes.keys().next().value!);
  }
}
