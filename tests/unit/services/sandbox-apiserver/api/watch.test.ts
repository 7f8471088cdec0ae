// Event-driven watches (docs/api.md "Watch"): on each inventory event the changes are computed once and every open
// watch reports them through its own selectors. What a client relies on: folding a watch's events onto its initial
// ADDED set always gives the view a fresh list would give, after any sequence of republishes, nodes going stale and
// coming back; and every watch sees an event in the same turn as the inventory event (no poll).
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { FakeClock } from "#shared/clock/index.ts";
import type { InventoryRecord } from "#shared/fleet/index.ts";
// The sandboxes folder first: the api folder imports from it (and it, through create.ts, from the api folder).
import { SandboxChanges, keyOf } from "#services/sandbox-apiserver/sandboxes/changes.ts";
import { SandboxReader } from "#services/sandbox-apiserver/sandboxes/store.ts";
import { parseFieldSelector, parseLabelSelector } from "#services/sandbox-apiserver/api/selectors.ts";
import { watchStream } from "#services/sandbox-apiserver/api/watch.ts";

type Entry = { name: string; id: string; phase: string; deadline?: string };

function record(node: string, entries: Entry[]): InventoryRecord {
  return { name: node, address: "", inventory: { node, entries } } as unknown as InventoryRecord;
}

/** A fleet the test changes by hand: `set` replaces the fresh records and fires the informer's change callback. */
function fakeFleet(initial: InventoryRecord[]) {
  let records = initial;
  const listeners = new Set<() => void>();
  const fleet = {
    fresh: () => records,
    freshNode: (name: string) => records.find((r) => r.name === name),
    onChange: (fn: () => void) => {
      listeners.add(fn);
      return () => listeners.delete(fn);
    },
  };
  return {
    fleet,
    set(next: InventoryRecord[]) {
      records = next;
      for (const fn of listeners) fn();
    },
  };
}

interface Event {
  type: string;
  object: { kind?: string; metadata: { namespace?: string; name?: string; resourceVersion?: string }; status?: { nodeName?: string }; rows?: unknown[] };
}

/** Opens a watch and collects its events as they are enqueued. */
function open(setup: ReturnType<typeof setupWatch>, q: { namespace?: string; labels?: string; fields?: string; table?: boolean }) {
  const ac = new AbortController();
  const stream = watchStream(
    { reader: setup.reader, changes: setup.changes, clock: setup.clock, shutdown: setup.shutdown.signal },
    {
      ...(q.namespace !== undefined ? { namespace: q.namespace } : {}),
      labels: parseLabelSelector(q.labels),
      fields: parseFieldSelector(q.fields),
      ...(q.table ? { table: { version: "v1" as const, includeObject: "Metadata" as const, noHeaders: false } } : {}),
      sendInitialEvents: true,
    },
    ac.signal,
  );
  const events: Event[] = [];
  const r = stream.getReader();
  const dec = new TextDecoder();
  let buf = "";
  const pump = (async () => {
    for (;;) {
      const { done, value } = await r.read();
      if (done) return;
      buf += dec.decode(value, { stream: true });
      for (let i = buf.indexOf("\n"); i >= 0; i = buf.indexOf("\n")) {
        const line = buf.slice(0, i).trim();
        buf = buf.slice(i + 1);
        if (line) events.push(JSON.parse(line) as Event);
      }
    }
  })();
  return { events, close: async () => (ac.abort(), await pump) };
}

function setupWatch(initial: InventoryRecord[]) {
  const f = fakeFleet(initial);
  const clock = new FakeClock();
  const reader = new SandboxReader(f.fleet, {} as never);
  const changes = new SandboxChanges({ fleet: f.fleet, sandboxesOf: (rec) => reader.sandboxesOf(rec), clock });
  return { ...f, clock, reader, changes, shutdown: new AbortController() };
}

/** Lets the stream's reader drain what was enqueued. */
const drain = () => new Promise((r) => setTimeout(r, 0));

/** Folds events onto a view: key → resourceVersion (the version is a content hash without the node, docs/api.md). */
function fold(events: Event[]): Map<string, string> {
  const view = new Map<string, string>();
  for (const e of events) {
    if (e.type === "BOOKMARK") continue;
    const k = `${e.object.metadata.namespace}/${e.object.metadata.name}`;
    if (e.type === "DELETED") view.delete(k);
    else view.set(k, e.object.metadata.resourceVersion ?? "");
  }
  return view;
}

/** What a fresh list shows through the same filter: the last matching copy per key. */
function expected(reader: SandboxReader, namespace: string | undefined, labels: string | undefined): Map<string, string> {
  const sel = parseLabelSelector(labels);
  const view = new Map<string, string>();
  for (const s of reader.list(namespace)) if (sel.matches(s.metadata.labels)) view.set(keyOf(s), s.metadata.resourceVersion ?? "");
  return view;
}

const entryArb = fc.record({
  name: fc.tuple(fc.constantFrom("a", "b"), fc.constantFrom("x", "y", "z")).map(([ns, n]) => `${ns}/${n}`),
  id: fc.constantFrom("i1", "i2"),
  phase: fc.constantFrom("Running", "Hibernated"),
});
const nodeArb = fc.array(entryArb, { maxLength: 4 });
const stepArb = fc.record({ node: fc.integer({ min: 0, max: 5 }), entries: fc.option(nodeArb, { nil: undefined }) });

describe("event-driven watch", () => {
  test("folding every watch's events onto its initial view equals a fresh list after any sequence of inventory events", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(nodeArb, { minLength: 6, maxLength: 6 }), fc.array(stepArb, { maxLength: 10 }), async (initial, steps) => {
        const fleet = new Map<number, InventoryRecord>();
        initial.forEach((entries, i) => fleet.set(i, record(`node-${i}`, entries)));
        const current = () => [...fleet.entries()].sort((x, y) => x[0] - y[0]).map(([, r]) => r);
        const s = setupWatch(current());
        const filters = [{}, { namespace: "a" }, { labels: "sandbox.cocoonstack.io/phase=Running" }, { namespace: "b", labels: "sandbox.cocoonstack.io/phase!=Running" }];
        const watches = filters.map((q) => ({ q, w: open(s, q) }));
        for (const step of steps) {
          if (step.entries === undefined) fleet.delete(step.node);
          else fleet.set(step.node, record(`node-${step.node}`, step.entries));
          s.set(current());
        }
        await drain();
        for (const { q, w } of watches) {
          const fresh = new SandboxReader(s.fleet, {} as never);
          expect(fold(w.events)).toEqual(expected(fresh, (q as { namespace?: string }).namespace, (q as { labels?: string }).labels));
          await w.close();
        }
        s.changes.stop();
      }),
      { numRuns: 150 },
    );
  });

  test("one republish reaches 100 watches in the same turn, each with exactly its own events; a republish changing no sandbox sends none", async () => {
    const n1 = (deadline: string, extra: Entry[] = []) =>
      record("n1", [{ name: "fan/a", id: "sb_a", phase: "Running", deadline }, { name: "fan/b", id: "sb_b", phase: "Hibernated" }, ...extra]);
    const s = setupWatch([n1("2026-12-31T00:00:00Z"), record("n2", [{ name: "other/o", id: "sb_o", phase: "Running" }])]);
    const fanned = Array.from({ length: 100 }, () => open(s, { namespace: "fan" }));
    const running = open(s, { namespace: "fan", labels: "sandbox.cocoonstack.io/phase=Running" });
    const table = open(s, { namespace: "fan", table: true });
    const pinned = open(s, { namespace: "fan", fields: "metadata.name=a" });
    const everywhere = open(s, {});
    await drain();
    await drain(); // the pinned watch's initial resolve
    const mark = [...fanned, running, table, pinned, everywhere].map((w) => w.events.length);
    expect(fanned[0]!.events.map((e) => e.type)).toEqual(["ADDED", "ADDED", "BOOKMARK"]);

    // Same sandboxes, a new record object (as a republish with a new publishedAt gives): nothing to report.
    s.set([n1("2026-12-31T00:00:00Z"), s.fleet.fresh()[1]!]);
    s.set([n1("2027-01-01T00:00:00Z", [{ name: "fan/c", id: "sb_c", phase: "Running" }]), s.fleet.fresh()[1]!]);
    await drain();
    const since = (w: { events: Event[] }, i: number) => w.events.slice(mark[i]).map((e) => `${e.type} ${e.object.metadata.name ?? ""}`);
    for (let i = 0; i < fanned.length; i++) expect(since(fanned[i]!, i)).toEqual(["MODIFIED a", "ADDED c"]);
    expect(since(running, 100)).toEqual(["MODIFIED a", "ADDED c"]);
    // Table watches carry one-row Tables, column headers only on the first event.
    const rows = table.events.slice(mark[101]);
    expect(rows.map((e) => [e.type, e.object.kind, "columnDefinitions" in e.object])).toEqual([
      ["MODIFIED", "Table", false],
      ["ADDED", "Table", false],
    ]);
    expect(since(pinned, 102)).toEqual(["MODIFIED a"]);
    expect(since(everywhere, 103)).toEqual(["MODIFIED a", "ADDED c"]);
    // The 100 identical watches got the very same bytes of each event: encoded once.
    expect(new Set(fanned.map((w) => JSON.stringify(w.events.at(-1))))).toHaveProperty("size", 1);

    // b leaves the fleet: namespace watches see DELETED with the last object; the label-selected one never saw b.
    s.set([record("n1", [{ name: "fan/a", id: "sb_a", phase: "Running", deadline: "2027-01-01T00:00:00Z" }, { name: "fan/c", id: "sb_c", phase: "Running" }]), s.fleet.fresh()[1]!]);
    await drain();
    expect(fanned[7]!.events.at(-1)).toMatchObject({ type: "DELETED", object: { metadata: { name: "b" }, status: { nodeName: "n1" } } });
    expect(since(running, 100)).toEqual(["MODIFIED a", "ADDED c"]);
    for (const w of [...fanned, running, table, pinned, everywhere]) await w.close();
    s.changes.stop();
  });

  test("a node aging out with no event (freshness capped by our clock) is caught by the periodic re-check", async () => {
    let fresh = [record("n1", [{ name: "ns/a", id: "i", phase: "Running" }])];
    const listeners = new Set<() => void>();
    const fleet = { fresh: () => fresh, freshNode: () => undefined, onChange: (fn: () => void) => (listeners.add(fn), () => listeners.delete(fn)) };
    const clock = new FakeClock();
    const reader = new SandboxReader(fleet, {} as never);
    const changes = new SandboxChanges({ fleet, sandboxesOf: (rec) => reader.sandboxesOf(rec), clock });
    const s = { reader, changes, clock, shutdown: new AbortController() } as unknown as ReturnType<typeof setupWatch>;
    const w = open(s, {});
    await drain();
    fresh = []; // no informer event
    clock.advance(1000);
    await drain();
    expect(w.events.map((e) => e.type)).toEqual(["ADDED", "BOOKMARK", "DELETED"]);
    await w.close();
    changes.stop();
  });
});

describe("a watcher that does not read (issue 22 case 5)", () => {
  const LIMIT = 8 * 1024;
  const entries = (n: number, phase: string): Entry[] => Array.from({ length: n }, (_, i) => ({ name: `slow/s${i}`, id: `sb_${i}`, phase }));

  function openUnread(s: ReturnType<typeof setupWatch>) {
    const ac = new AbortController();
    const stream = watchStream(
      { reader: s.reader, changes: s.changes, clock: s.clock, shutdown: s.shutdown.signal, queueLimitBytes: LIMIT },
      { namespace: "slow", labels: parseLabelSelector(undefined), fields: parseFieldSelector(undefined), sendInitialEvents: true },
      ac.signal,
    );
    /** Reads everything the stream still has, to its end (or until `max` events). */
    const readAll = async (max = Infinity): Promise<{ events: Event[]; ended: boolean }> => {
      const r = stream.getReader();
      const events: Event[] = [];
      let buf = "";
      const dec = new TextDecoder();
      while (events.length < max) {
        const { done, value } = await r.read();
        if (done) return { events, ended: true };
        buf += dec.decode(value, { stream: true });
        for (let i = buf.indexOf("\n"); i >= 0; i = buf.indexOf("\n")) {
          const line = buf.slice(0, i).trim();
          buf = buf.slice(i + 1);
          if (line) events.push(JSON.parse(line) as Event);
        }
      }
      r.releaseLock();
      return { events, ended: false };
    };
    return { readAll, abort: () => ac.abort() };
  }

  test("past the queue bound its events are dropped and the watch ends with a 410 Expired ERROR event", async () => {
    const s = setupWatch([record("n1", entries(300, "Running"))]);
    const w = openUnread(s);
    // Each flip of 300 sandboxes is 300 MODIFIED events (~150 KiB), far over the 8 KiB bound plus the stream's 64 KiB.
    s.set([record("n1", entries(300, "Hibernated"))]);
    s.set([record("n1", entries(300, "Running"))]);
    const { events, ended } = await w.readAll();
    expect(ended).toBe(true);
    const last = events.at(-1) as unknown as { type: string; object: { kind: string; code: number; reason: string; message: string } };
    expect(last.type).toBe("ERROR");
    expect(last.object).toMatchObject({ kind: "Status", code: 410, reason: "Expired" });
    expect(last.object.message).toContain("did not read its events");
    // What was delivered before the end is a bounded prefix: far fewer than the 600 changes queued.
    expect(events.length).toBeLessThan(300 + 1 + 300);
    // The watch no longer listens: later changes cost it nothing (and nothing throws).
    s.set([record("n1", entries(300, "Hibernated"))]);
    s.changes.stop();
  });

  test("a large initial state is not counted against the bound: a client that reads late gets all of it", async () => {
    const s = setupWatch([record("n1", entries(3000, "Running"))]);
    const w = openUnread(s);
    await drain();
    const { events } = await w.readAll(3001);
    expect(events.filter((e) => e.type === "ADDED")).toHaveLength(3000);
    expect(events.at(-1)?.type).toBe("BOOKMARK");
    w.abort();
    s.changes.stop();
  });

  test("a watcher that keeps reading is never closed, however many events pass", async () => {
    const s = setupWatch([record("n1", entries(20, "Running"))]);
    const w = open(s, { namespace: "slow" });
    await drain();
    for (let i = 0; i < 60; i++) {
      s.set([record("n1", entries(20, i % 2 ? "Running" : "Hibernated"))]);
      await drain();
    }
    expect(w.events.filter((e) => e.type === "MODIFIED")).toHaveLength(60 * 20);
    expect(w.events.some((e) => (e.type as string) === "ERROR")).toBe(false);
    await w.close();
    s.changes.stop();
  });
});
