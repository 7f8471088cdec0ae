import { describe, expect, test } from "bun:test";
import type { FleetNode } from "#shared/fleet/types.ts";
import { claimCandidates, findEntry, freshNodes, namespaceOfName } from "#shared/fleet/view.ts";

const node = (name: string, publishedAt?: number, extra: Partial<FleetNode> = {}): FleetNode => ({
  name,
  address: `${name}:7777`,
  ...(publishedAt === undefined ? {} : { publishedAt }),
  pools: [],
  templates: [],
  entries: [],
  ...extra,
});

describe("freshNodes (inventory staleness rule)", () => {
  test("a node trailing the newest publishedAt by more than the window leaves; within it stays", () => {
    const now = 1_000_000;
    const got = freshNodes([node("a", now), node("b", now - 90_000), node("c", now - 90_001)], 90_000, now);
    expect(got.map((n) => n.name)).toEqual(["a", "b"]);
  });
  test("no node stamps publishedAt: none is stale", () => {
    expect(freshNodes([node("a"), node("b")], 1, 5).map((n) => n.name)).toEqual(["a", "b"]);
  });
  test("an unstamped node is stale once any node stamps one", () => {
    expect(freshNodes([node("a", 10), node("b")], 100, 10).map((n) => n.name)).toEqual(["a"]);
  });
  test("a stamp from the future is capped by the local clock, so it cannot age the fleet out", () => {
    const now = 1_000_000;
    const got = freshNodes([node("future", now + 10_000_000), node("b", now - 1_000)], 90_000, now);
    expect(got.map((n) => n.name)).toEqual(["future", "b"]);
  });
});

describe("lookups", () => {
  const entry = { id: "sb_00000000000000ab", name: "team-a/e2b-x", namespace: "team-a", phase: "Running" as const };
  const nodes = [node("n1", undefined, { entries: [entry] })];
  test("either id spelling finds the entry; another namespace does not", () => {
    expect(findEntry(nodes, "sb-00000000000000ab")?.node.name).toBe("n1");
    expect(findEntry(nodes, "sb_00000000000000ab", "team-a")?.entry.id).toBe(entry.id);
    expect(findEntry(nodes, "sb-00000000000000ab", "team-b")).toBeUndefined();
  });
  test("the same id twice on a node (two namespaces): the first in row order that matches the namespace; upper case and whitespace as sameSandboxId takes them", () => {
    const a = { id: "sb_00000000000000cd", name: "team-a/x", namespace: "team-a", phase: "Running" as const };
    const b = { ...a, name: "team-b/x", namespace: "team-b" };
    const twice = [node("n0", undefined, { entries: [entry] }), node("n1", undefined, { entries: [a, b] })];
    expect(findEntry(twice, "sb-00000000000000cd")?.entry).toBe(a);
    expect(findEntry(twice, "sb_00000000000000cd", "team-b")?.entry).toBe(b);
    expect(findEntry(twice, " SB-00000000000000CD ", "team-b")?.entry).toBe(b);
    // The raw id is matched as given (sandboxd ids are lowercase): an upper-case underscore spelling names nothing.
    expect(findEntry(twice, "SB_00000000000000CD")).toBeUndefined();
    expect(findEntry(twice, "sb-00000000000000ce")).toBeUndefined();
  });
  test("a node's new rows array is looked up afresh (the index belongs to one array)", () => {
    const first = node("n1", 1, { entries: [entry] });
    expect(findEntry([first], "sb-00000000000000ab")?.entry).toBe(entry);
    const moved = { ...entry, id: "sb_00000000000000ef" };
    const next = { ...first, entries: [moved] };
    expect(findEntry([next], "sb-00000000000000ab")).toBeUndefined();
    expect(findEntry([next], "sb-00000000000000ef")?.entry).toBe(moved);
    // A node without an address is no place to send anyone.
    expect(findEntry([{ ...next, address: "" }], "sb-00000000000000ef")).toBeUndefined();
  });
  test("namespace of a claim_ref: before the first slash, default without one", () => {
    expect(namespaceOfName("a/b/c")).toBe("a");
    expect(namespaceOfName("plain")).toBe("default");
  });
  test("claim candidates: only warm pools of the exact key, warmest first", () => {
    const pool = (warm: number, net: "none" | "egress" = "none") => ({ template: "img", net, size: "small" as const, warm, target: 4 });
    const fleet = [node("cold", 1, { pools: [pool(0)] }), node("w1", 1, { pools: [pool(1)] }), node("w3", 1, { pools: [pool(3), pool(9, "egress")] })];
    expect(claimCandidates(fleet, { template: "img", net: "none", size: "small" }).map((c) => c.node.name)).toEqual(["w3", "w1"]);
  });
});
