// Who may name a built template (shared/built-templates, docs/decisions.md "Built templates belong to their
// namespace"): the one check vk-sandbox, the aggregated Create and the warm-pool driver share.
import { expect, test } from "bun:test";
import { builtTemplateParts, builtTemplateRefusal } from "#shared/built-templates/index.ts";

test("pool images are none of the check's business", () => {
  for (const t of ["base", "img:1", "registry.example/e2b/base:1", "e2bdev/base", "e2b-base"]) expect(builtTemplateRefusal(t, "team-a")).toBeUndefined();
});

test("a built template of the object's own namespace is allowed; another namespace's is refused naming both", () => {
  expect(builtTemplateRefusal("e2b/team-a/app", "team-a")).toBeUndefined();
  expect(builtTemplateRefusal("e2b/team-a/my.app_v-2", "team-a")).toBeUndefined();
  const r = builtTemplateRefusal("e2b/team-b/payroll", "team-a");
  expect(r).toMatchObject({ kind: "other-namespace", owner: "team-b" });
  expect(r?.message).toBe('template "e2b/team-b/payroll" belongs to namespace "team-b": a built template may be named only from its own namespace, not from "team-a"');
});

test("step cache entries are refused even in their own namespace", () => {
  expect(builtTemplateRefusal("e2b/team-a/_c-0123abcd", "team-a")).toMatchObject({ kind: "invalid", message: expect.stringContaining("build step cache entry") });
});

test("any other spelling under the prefix is refused as invalid: case, blanks, missing or extra parts, bad characters", () => {
  for (const t of ["E2B/team-a/app", " e2b/team-a/app", "e2b/team-a/app ", "e2b/team-a", "e2b/", "e2b//app", "e2b/team-a/x/y", "e2b/Team-A/app", "e2b/team-a/.hidden", "e2b/team-a/a b", "e2b/-x/app"]) {
    expect({ t, kind: builtTemplateRefusal(t, "team-a")?.kind }).toEqual({ t, kind: "invalid" });
  }
});

test("a long name is cut in the message", () => {
  const r = builtTemplateRefusal(`e2b/team-b/${"x".repeat(500)}`, "team-a");
  expect(r?.message.length).toBeLessThan(300);
});

test("builtTemplateParts reads the canonical form only", () => {
  expect(builtTemplateParts("e2b/team-a/app")).toEqual({ namespace: "team-a", name: "app" });
  expect(builtTemplateParts("e2b/team-a/")).toBeUndefined();
  expect(builtTemplateParts("base")).toBeUndefined();
});
