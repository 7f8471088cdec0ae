// Which nodes' sandboxes leave and arrive on an inventory event (changes.ts changedNodes): a node republished with the
// same rows array (a root-only publish) is neither, whether the fleet kept its nodes or some came and went.
import { expect, test } from "bun:test";
import { recordOf, type InventoryRecord } from "#shared/fleet/inventory.ts";
import type { NodeInventory } from "#shared/inventory/index.ts";
import { changedNodes } from "#services/sandbox-apiserver/sandboxes/changes.ts";

const inv = (node: string, publishedAt: string, entries: NodeInventory["entries"]): NodeInventory => ({
  apiVersion: "sandbox.cocoonstack.io/v1beta1",
  kind: "NodeInventory",
  metadata: { name: node },
  node,
  address: "10.0.0.1:7777",
  publishedAt,
  ...(entries ? { entries } : {}),
});
const rows = (n: string): NonNullable<NodeInventory["entries"]> => [{ name: `team/${n}`, id: `sb_${n.padStart(16, "0")}`, phase: "Running" }];
const names = (l: readonly InventoryRecord[]) => l.map((r) => `${r.name}@${r.inventory.publishedAt}`);

test("same nodes: a root-only republish is unchanged, new rows are a removal and an addition, an identical record nothing", () => {
  const aRows = rows("a");
  const a1 = recordOf(inv("a", "t1", aRows));
  const b1 = recordOf(inv("b", "t1", rows("b")));
  const c1 = recordOf(inv("c", "t1", rows("c")));
  const a2 = recordOf(inv("a", "t2", aRows), a1); // the same array: a publish that changed only the root
  const b2 = recordOf(inv("b", "t2", rows("b2")), b1); // a new array: its rows changed
  const { removed, added } = changedNodes([a1, b1, c1], [a2, b2, c1]);
  expect(names(removed)).toEqual(["b@t1"]);
  expect(names(added)).toEqual(["b@t2"]);
});

test("nodes that come and go: the gone ones removed, the new ones added, a root-only republish beside them unchanged", () => {
  const aRows = rows("a");
  const a1 = recordOf(inv("a", "t1", aRows));
  const b1 = recordOf(inv("b", "t1", rows("b")));
  const a2 = recordOf(inv("a", "t2", aRows), a1);
  const c1 = recordOf(inv("c", "t1", rows("c")));
  const { removed, added } = changedNodes([a1, b1], [a2, c1]);
  expect(names(removed)).toEqual(["b@t1"]);
  expect(names(added)).toEqual(["c@t1"]);
  // A node without rows has no array to share: its republish counts as a change (it renders nothing either way).
  const e1 = recordOf(inv("e", "t1", undefined));
  const e2 = recordOf(inv("e", "t2", undefined), e1);
  expect(names(changedNodes([e1], [e2]).added)).toEqual(["e@t2"]);
});
