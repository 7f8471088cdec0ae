import { describe, expect, test } from "bun:test";
import { humanAge } from "#services/sandbox-apiserver/api/age.ts";
import { tableRequest, toTable } from "#services/sandbox-apiserver/api/table.ts";
import { sandboxFromEntry } from "#services/sandbox-apiserver/sandboxes/object.ts";
import { FakeClock } from "#shared/clock/index.ts";

describe("the AGE column's rounding", () => {
  const s = 1000, m = 60 * s, h = 60 * m, d = 24 * h;
  const cases: [number, string][] = [
    [-500, "0s"], [-1500, "0s"], [-2500, "<invalid>"], [0, "0s"], [119 * s, "119s"], [2 * m, "2m"], [5 * m + 3 * s, "5m3s"],
    [10 * m + 59 * s, "10m"], [179 * m, "179m"], [3 * h + 5 * m, "3h5m"], [5 * h, "5h"], [8 * h + 30 * m, "8h"], [47 * h, "47h"],
    [2 * d + 3 * h, "2d3h"], [3 * d, "3d"], [8 * d + 5 * h, "8d"], [729 * d, "729d"], [2 * 365 * d + 10 * d, "2y10d"], [9 * 365 * d, "9y"],
  ];
  for (const [ms, want] of cases) test(`${ms} ms is ${want}`, () => expect(humanAge(ms)).toBe(want));
});

describe("the sandboxes Table", () => {
  const clock = new FakeClock(Date.parse("2026-12-01T12:00:00Z"));
  const t = tableRequest("application/json;as=Table;v=v1;g=meta.k8s.io,application/json", new URLSearchParams(), clock)!;
  const rich = sandboxFromEntry(
    { name: "a/rich", id: "sb_1", phase: "Hibernated", template: "img:1", addr: "10.0.0.5:7777", deadline: "2026-12-02T00:00:00Z", claimedAt: "2026-12-01T11:58:30Z" },
    "n1",
  );
  const bare = sandboxFromEntry({ name: "bare", phase: "Running" }, "n2");

  test("columns Name, Phase, Mode, Node, Template, Age, and Claim ID, Address, Deadline at priority 1 (-o wide)", () => {
    const table = toTable([rich], t) as { columnDefinitions: { name: string; priority: number }[] };
    expect(table.columnDefinitions.map((c) => `${c.name}:${c.priority}`)).toEqual([
      "Name:0", "Phase:0", "Mode:0", "Node:0", "Template:0", "Age:0", "Claim ID:1", "Address:1", "Deadline:1",
    ]);
  });

  test("cells carry the node's values; Age is measured on the server's clock", () => {
    const row = (s: typeof rich) => toTable([s], t).rows[0]!.cells;
    expect(row(rich)).toEqual(["rich", "Hibernated", "Suspended", "n1", "img:1", "90s", "sb_1", "10.0.0.5", "2026-12-02T00:00:00Z"]);
    expect(row(bare)).toEqual(["bare", "Running", "Running", "n2", "<none>", "<unknown>", "<none>", "<none>", "<none>"]);
    clock.advance(60 * 60_000);
    expect(row(rich)[5]).toBe("61m");
  });

  test("a created sandbox's Address is the claim's owner address", () => {
    const created = { ...rich, metadata: { ...rich.metadata, annotations: { ...rich.metadata.annotations, "sandbox.cocoonstack.io/address": "10.0.0.5:49983" } } };
    expect(toTable([created], t).rows[0]!.cells[7]).toBe("10.0.0.5:49983");
  });
});
