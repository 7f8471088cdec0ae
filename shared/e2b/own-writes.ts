// Read your own writes (docs/e2b.md "Read your own writes", issue 20 part 2): the fleet snapshot lags a create,
// kill, pause or resume by a poll tick or an inventory publish, and agents list or kill right after one. This
// replica keeps its own recent writes and lays them over the snapshot for the namespace's list, get and kill: a
// created sandbox is listed at once, a killed one is gone (a second kill or get is 404 without a node call), a
// paused or resumed one shows its new state. An overlay entry is dropped as soon as the snapshot shows the same
// state, and after OWN_WRITE_MS in any case (a sandbox that changed again elsewhere is then the snapshot's word).
// Other replicas see the change within one publish, as before.
import type { Clock } from "../clock/index.ts";
import type { FleetNode } from "../fleet/index.ts";
import { claimIdOf } from "./ids.ts";
import { entriesIn } from "./nodes.ts";

/** How long an own write overrides the snapshot when the snapshot never shows it (a publish or two). */
export const OWN_WRITE_MS = 60_000;
/** Bound on remembered writes (a create burst of one replica); the oldest go first. */
export const OWN_WRITES_MAX = 10_000;

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

export class OwnWrites {
  /** `<ns>\0<claim id>` -> the latest write of this replica; Map order = insertion order (oldest first). */
  private readonly writes = new Map<string, Write>();

  /** Writes over the bound left before the next sweep of expired entries (the first one sweeps at once). */
  private untilSweep = 0;

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
    return this.current(`${ns}\0${claimIdOf(id)}`)?.kind === "killed";
  }

  /** The namespace's sandboxes: the snapshot's entries with this replica's writes laid over them. */
  rows(nodes: readonly FleetNode[], ns: string): ListedRow[] {
    const out: ListedRow[] = [];
    const seen = new Set<string>();
    for (const { node, entry } of entriesIn(nodes, ns)) {
      seen.add(entry.id);
      const key = `${ns}\0${entry.id}`;
      const w = this.current(key);
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
        if (want === paused) this.writes.delete(key);
        out.push(want === paused ? row : { ...row, paused: want });
      }
      // killed: left out until the snapshot drops it.
    }
    for (const [key, w] of this.writes) {
      if (!key.startsWith(`${ns}\0`)) continue;
      const claimId = key.slice(ns.length + 1);
      if (seen.has(claimId)) continue;
      if (w.until <= this.clock.now()) this.writes.delete(key);
      // Killed and no longer listed: the snapshot caught up.
      else if (w.kind === "killed") this.writes.delete(key);
      else if (w.kind === "created") out.push(w.row);
    }
    return out;
  }

  private current(key: string): Write | undefined {
    const w = this.writes.get(key);
    if (w && w.until <= this.clock.now()) {
      this.writes.delete(key);
      return undefined;
    }
    return w;
  }

  private put(ns: string, claimId: string, w: Write): void {
    const key = `${ns}\0${claimId}`;
    const prev = this.writes.get(key);
    this.writes.delete(key);
    // A pause or resume of a sandbox created here and not listed yet changes the created row itself.
    if (prev?.kind === "created" && (w.kind === "paused" || w.kind === "resumed")) {
      this.writes.set(key, { kind: "created", row: { ...prev.row, paused: w.kind === "paused" }, until: prev.until, changed: true });
    } else this.writes.set(key, w);
    // Over the bound, expired writes go first (swept at most once per thousand writes: a pass over the whole map on
    // every write ran once a create -> kill flood had filled it), then the oldest (Map order is write order).
    if (this.writes.size > OWN_WRITES_MAX && this.untilSweep-- <= 0) {
      this.untilSweep = 1000;
      const now = this.clock.now();
      for (const [k, v] of this.writes) if (v.until <= now) this.writes.delete(k);
    }
    while (this.writes.size > OWN_WRITES_MAX) this.writes.delete(this.writes.keys().next().value!);
  }
}
