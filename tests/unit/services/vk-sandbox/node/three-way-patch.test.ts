import { describe, expect, test } from "bun:test";
import { jsonEqual, threeWayMergePatch } from "#services/vk-sandbox/node/three-way-patch.ts";

describe("threeWayMergePatch", () => {
  test("a current object that already matches yields an empty patch", () => {
    const want = { a: 1, m: { x: "1" } };
    expect(threeWayMergePatch(want, want, { ...want, other: true })).toEqual({});
  });

  test("fields nobody asked about (owned by another writer) are never touched", () => {
    const p = threeWayMergePatch({ a: 1 }, { a: 2 }, { a: 1, theirs: "keep" });
    expect(p).toEqual({ a: 2 });
  });

  test("a field we applied before and no longer want is deleted with null", () => {
    const p = threeWayMergePatch({ labels: { old: "1", keep: "1" } }, { labels: { keep: "1" } }, { labels: { old: "1", keep: "1", theirs: "x" } });
    expect(p).toEqual({ labels: { old: null } });
  });

  test("a field we never applied is not deleted even when we do not want it", () => {
    expect(threeWayMergePatch({}, { a: 1 }, { a: 1, b: 2 })).toEqual({});
  });

  test("merge-key lists patch only changed elements and pin our order", () => {
    const original = { conditions: [{ type: "Ready", status: "" }] };
    const modified = { conditions: [{ type: "Ready", status: "True" }, { type: "DiskPressure", status: "" }] };
    const current = { conditions: [{ type: "Theirs", status: "False" }, { type: "Ready", status: "" }, { type: "DiskPressure", status: "" }] };
    expect(threeWayMergePatch(original, modified, current)).toEqual({
      conditions: [{ type: "Ready", status: "True" }],
      "$setElementOrder/conditions": [{ type: "Ready" }, { type: "DiskPressure" }],
    });
  });

  test("merge-key list elements we dropped are deleted with $patch: delete", () => {
    const p = threeWayMergePatch(
      { addresses: [{ type: "InternalIP", address: "10.0.0.1" }, { type: "Hostname", address: "n" }] },
      { addresses: [{ type: "Hostname", address: "n" }] },
      { addresses: [{ type: "InternalIP", address: "10.0.0.1" }, { type: "Hostname", address: "n" }] },
    );
    expect(p).toEqual({
      addresses: [{ type: "InternalIP", $patch: "delete" }],
      "$setElementOrder/addresses": [{ type: "Hostname" }],
    });
  });

  test("a wrong order alone produces a patch that fixes the order", () => {
    const want = { addresses: [{ type: "InternalIP", address: "1" }, { type: "Hostname", address: "n" }] };
    const p = threeWayMergePatch(want, want, { addresses: [{ type: "Hostname", address: "n" }, { type: "InternalIP", address: "1" }] });
    expect(p["$setElementOrder/addresses"]).toEqual([{ type: "InternalIP" }, { type: "Hostname" }]);
  });

  test("other lists are atomic and replaced whole", () => {
    expect(threeWayMergePatch({}, { l: [1, 2] }, { l: [1] })).toEqual({ l: [1, 2] });
  });

  test("jsonEqual ignores key order", () => {
    expect(jsonEqual({ a: 1, b: [1, { c: 2 }] }, { b: [1, { c: 2 }], a: 1 })).toBe(true);
    expect(jsonEqual({ a: 1 }, { a: 1, b: 2 })).toBe(false);
  });
});
