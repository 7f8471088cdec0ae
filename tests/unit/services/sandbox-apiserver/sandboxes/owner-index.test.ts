import { expect, test } from "bun:test";
import { OwnerIndex } from "#services/sandbox-apiserver/sandboxes/owner-index.ts";

test("the owner index turns over at its limit, keeps the previous generation, and copies a hit there forward", () => {
  const idx = new OwnerIndex(2);
  idx.set("a", "n1");
  idx.set("b", "n1");
  idx.set("c", "n2"); // current was full: {a, b} becomes the previous generation
  expect(idx.size).toBe(3);
  expect(idx.get("b")).toBe("n1"); // found in the previous generation, copied into the current {c, b}
  idx.set("d", "n3"); // current full again: {c, b} becomes previous, {a, b} is dropped
  expect(idx.get("a")).toBeUndefined();
  expect(idx.get("b")).toBe("n1"); // survived because it was used
  expect(idx.size).toBeLessThanOrEqual(4);
});
