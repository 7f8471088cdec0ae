// SandboxReader.list after some nodes changed merges their sandboxes into the previous list instead of sorting the
// whole fleet again; it must give exactly what a fresh reader's full sort gives, whatever changed.
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import type { InventoryRecord } from "#shared/fleet/index.ts";
import { SandboxReader } from "#services/sandbox-apiserver/sandboxes/store.ts";

type Entry = { name: string; id: string; phase: string };

function record(node: string, entries: Entry[]): InventoryRecord {
  return { name: node, address: "", inventory: { node, entries } } as unknown as InventoryRecord;
}

function readerOver(get: () => InventoryRecord[]): SandboxReader {
  return new SandboxReader({ fresh: get, freshNode: () => undefined }, {} as never);
}

/** What the list says, as plain data: namespace/name@node in order. */
const shape = (items: readonly { metadata: { namespace?: string; name?: string }; status: { nodeName?: string } }[]) =>
  items.map((s) => `${s.metadata.namespace}/${s.metadata.name}@${s.status.nodeName}`);

const entryArb = fc.record({
  name: fc.tuple(fc.constantFrom("a", "b", "c"), fc.constantFrom("x", "y", "z", "w")).map(([ns, n]) => `${ns}/${n}`),
  id: fc.string({ minLength: 1, maxLength: 3 }),
  phase: fc.constantFrom("Running", "Hibernated"),
});
const nodeArb = fc.array(entryArb, { maxLength: 6 });
// One step: republish node i with new entries, drop it (stale), or bring it (back).
const stepArb = fc.record({ node: fc.integer({ min: 0, max: 11 }), entries: fc.option(nodeArb, { nil: undefined }) });

describe("list after nodes change", () => {
  test("equals a fresh full sort after any sequence of republishes, removals and additions, for every namespace filter", () => {
    fc.assert(
      fc.property(fc.array(nodeArb, { minLength: 12, maxLength: 12 }), fc.array(stepArb, { maxLength: 12 }), fc.constantFrom(undefined, "a", "b"), (initial, steps, ns) => {
        const fleet = new Map<number, InventoryRecord>();
        initial.forEach((entries, i) => fleet.set(i, record(`node-${String(i).padStart(2, "0")}`, entries)));
        const current = () => [...fleet.entries()].sort((x, y) => x[0] - y[0]).map(([, r]) => r);
        const incremental = readerOver(current);
        incremental.list(ns);
        for (const step of steps) {
          if (step.entries === undefined) fleet.delete(step.node);
          else fleet.set(step.node, record(`node-${String(step.node).padStart(2, "0")}`, step.entries));
          const want = shape(readerOver(current).list(ns));
          expect(shape(incremental.list(ns))).toEqual(want);
          // A list of everything between two lists of one namespace (a watch polling between kubectl lists).
          expect(shape(incremental.list())).toEqual(shape(readerOver(current).list()));
        }
      }),
      { numRuns: 300 },
    );
  });

  test("a republished node's old sandboxes leave the list and its new ones come in, in order", () => {
    let nodes = [record("n1", [{ name: "a/1", id: "i1", phase: "Running" }]), record("n2", [{ name: "a/3", id: "i3", phase: "Running" }])];
    const reader = readerOver(() => nodes);
    expect(shape(reader.list())).toEqual(["a/1@n1", "a/3@n2"]);
    nodes = [nodes[0]!, record("n2", [{ name: "a/0", id: "i0", phase: "Running" }, { name: "a/1", id: "i9", phase: "Running" }])];
    expect(shape(reader.list())).toEqual(["a/0@n2", "a/1@n1", "a/1@n2"]);
  });
});
