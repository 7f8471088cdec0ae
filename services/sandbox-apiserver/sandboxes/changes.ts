// The fleet's sandbox changes, computed once per NodeInventory event and handed to every open watch at once
// (docs/api.md "Watch"). It keeps, per `<ns>/<name>`, every fresh node's copy of that sandbox (its holders); on each
// informer event it swaps the sandboxes of the nodes whose record changed (republished, gone stale, new) and reports
// the keys whose holders really changed (a node, or a resourceVersion). A watch then only decides what each changed
// key means through its own selectors: one republish of a 250-entry node costs one pass over its 250 sandboxes,
// however many watches are open, instead of every watch re-deriving the fleet.
import type { Logger } from "pino";
import type { Clock, Timer } from "#shared/clock/index.ts";
import type { InventoryFleet, InventoryRecord } from "#shared/fleet/index.ts";
import { errorMessage } from "#shared/log/index.ts";
import type { Sandbox } from "./object.ts";

/**
 * How often the fresh set is checked without an event. Freshness is judged against the newest `publishedAt`, capped by
 * this process's clock (docs/fleet.md), so a node can age out with no event when some node's stamp is ahead of our
 * clock; the check is one pass over the node list and does nothing when no node came or went.
 */
export const RESYNC_MS = 1000;

/** One `<ns>/<name>` whose holders changed: every fresh node's copy before and after, in node-name order. */
export interface SandboxChange {
  key: string;
  namespace: string;
  before: readonly Sandbox[];
  after: readonly Sandbox[];
}

/** One event's changes by key, and a memo the watches share for what they derive from them (encoded events). */
export interface ChangeBatch {
  changes: ReadonlyMap<string, SandboxChange>;
  /** The value `make` returns for (`obj`, `key`), computed once per batch however many watches ask. */
  memo<T>(obj: object, key: string, make: () => T): T;
}

export type ChangeListener = (batch: ChangeBatch) => void;

export const keyOf = (s: Sandbox) => `${s.metadata.namespace}/${s.metadata.name}`;

/** Same nodes holding the same versions: nothing a watch could report. */
function sameHolders(a: readonly Sandbox[], b: readonly Sandbox[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) {
    if (a[i]!.status.nodeName !== b[i]!.status.nodeName || a[i]!.metadata.resourceVersion !== b[i]!.metadata.resourceVersion) return false;
  }
  return true;
}

export interface SandboxChangesOptions {
  fleet: Pick<InventoryFleet, "fresh" | "onChange">;
  /** A node's sandboxes, the same objects for the same record (the reader's rendering). */
  sandboxesOf: (rec: InventoryRecord) => Iterable<Sandbox>;
  clock: Clock;
  log?: Logger;
}

export class SandboxChanges {
  private nodes: readonly InventoryRecord[] = [];
  private readonly holders = new Map<string, Sandbox[]>();
  private readonly listeners = new Set<ChangeListener>();
  private started = false;
  private resync?: Timer;
  private unsubscribeFleet?: () => void;

  constructor(private readonly o: SandboxChangesOptions) {}

  /**
   * Calls `fn` with the changes of every later inventory event. The state the first call diffs from is `nodes()` as it
   * is when this returns (no event can come between). Starts following the fleet on first use and keeps following it.
   */
  subscribe(fn: ChangeListener): () => void {
    if (!this.started) {
      this.started = true;
      this.unsubscribeFleet = this.o.fleet.onChange(() => this.sync());
      this.resync = this.o.clock.every(RESYNC_MS, () => this.sync());
    }
    this.sync();
    this.listeners.add(fn);
    return () => {
      this.listeners.delete(fn);
    };
  }

  /** The fresh nodes the current holders were built from, sorted by name. */
  current(): readonly InventoryRecord[] {
    return this.nodes;
  }

  /** Every fresh node's copy of `<ns>/<name>` as of the last event, in node-name order. */
  holdersOf(key: string): readonly Sandbox[] {
    return this.holders.get(key) ?? [];
  }

  stop(): void {
    this.resync?.cancel();
    this.unsubscribeFleet?.();
    this.listeners.clear();
    this.started = false;
  }

  /** Brings the holders up to the fleet's fresh nodes and tells every listener what changed. */
  sync(): void {
    const nodes = this.o.fleet.fresh();
    const last = this.nodes;
    if (nodes.length === last.length && nodes.every((r, i) => r === last[i])) return;
    const { removed, added } = changedNodes(last, nodes);
    // Each touched key's holders as they were before this event.
    const touched = new Map<string, Sandbox[]>();
    const touch = (key: string): Sandbox[] => {
      let list = this.holders.get(key);
      if (!touched.has(key)) touched.set(key, list ? [...list] : []);
      if (!list) {
        list = [];
        this.holders.set(key, list);
      }
      return list;
    };
    for (const rec of removed) {
      for (const s of this.o.sandboxesOf(rec)) {
        const list = touch(keyOf(s));
        const i = list.indexOf(s);
        if (i >= 0) list.splice(i, 1);
      }
    }
    for (const rec of added) {
      for (const s of this.o.sandboxesOf(rec)) {
        const list = touch(keyOf(s));
        // Node-name order; a node holding the name twice keeps its inventory order (as a list sorts them).
        let i = list.length;
        while (i > 0 && list[i - 1]!.status.nodeName! > s.status.nodeName!) i--;
        list.splice(i, 0, s);
      }
    }
    this.nodes = nodes;
    const changes = new Map<string, SandboxChange>();
    for (const [key, prev] of touched) {
      const next = this.holders.get(key)!;
      if (next.length === 0) this.holders.delete(key);
      if (sameHolders(prev, next)) continue;
      changes.set(key, { key, namespace: (next[0] ?? prev[0])!.metadata.namespace!, before: prev, after: next.length ? [...next] : [] });
    }
    if (changes.size === 0 || this.listeners.size === 0) return;
    const memos = new WeakMap<object, Map<string, unknown>>();
    const batch: ChangeBatch = {
      changes,
      memo<T>(obj: object, key: string, make: () => T): T {
        let m = memos.get(obj);
        if (!m) memos.set(obj, (m = new Map()));
        if (m.has(key)) return m.get(key) as T;
        const v = make();
        m.set(key, v);
        return v;
      },
    };
    for (const fn of this.listeners) {
      try {
        fn(batch);
      } catch (err) {
        this.o.log?.error({ err: errorMessage(err) }, "watch: a listener failed on an inventory change");
      }
    }
  }
}

/**
 * The records of `last` whose sandboxes leave and those of `nodes` whose sandboxes arrive. A node whose new record
 * carries the same rows array as its last (a publish that changed only its root) has the same rendered sandboxes
 * (store.ts): it is in neither, so a steady publish wave costs nothing per row. Both lists are sorted by name
 * (InventoryFleet.fresh()), so a fleet whose nodes did not come or go is paired in one pass with no set or map.
 */
export function changedNodes(last: readonly InventoryRecord[], nodes: readonly InventoryRecord[]): { removed: InventoryRecord[]; added: InventoryRecord[] } {
  const removed: InventoryRecord[] = [];
  const added: InventoryRecord[] = [];
  const sameRows = (a: InventoryRecord, b: InventoryRecord) => a.inventory.entries !== undefined && a.inventory.entries === b.inventory.entries;
  if (last.length === nodes.length && nodes.every((r, i) => r.name === last[i]!.name)) {
    nodes.forEach((rec, i) => {
      const prev = last[i]!;
      if (rec === prev || sameRows(prev, rec)) return;
      removed.push(prev);
      added.push(rec);
    });
    return { removed, added };
  }
  const lastByName = new Map(last.map((r) => [r.name, r] as const));
  const kept = new Set<InventoryRecord>();
  for (const rec of nodes) {
    const prev = lastByName.get(rec.name);
    if (prev && (prev === rec || sameRows(prev, rec))) {
      kept.add(rec);
      kept.add(prev);
    }
  }
  for (const rec of last) if (!kept.has(rec)) removed.push(rec);
  for (const rec of nodes) if (!kept.has(rec)) added.push(rec);
  return { removed, added };
}
