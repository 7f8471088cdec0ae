// The step cache is bounded per namespace (attacker review M3): a chain caches its first 16 steps and its last, a
// namespace over its entry cap loses its oldest chains (never the one just built).
import { describe, expect, test } from "bun:test";
import { CACHE_CHAIN_STEPS, builtNames, cachesStep, overflow } from "#shared/e2b/builds/cache.ts";
import type { NodeAccess } from "#shared/e2b/nodes.ts";
import type { FleetTemplate } from "#shared/fleet/index.ts";

const entry = (name: string, createdAt: number, i: number) => ({ t: { template: `e2b/a/_c-${name}${i}`, net: "none", size: "small", createdAt, labels: { n: name, s: "{}" } } as FleetTemplate });

describe("step cache bounds", () => {
  test("a 512-step build caches its first 16 steps and its last", () => {
    const saved = Array.from({ length: 512 }, (_, i) => i).filter((i) => cachesStep(i, 512));
    expect(CACHE_CHAIN_STEPS).toBe(16);
    expect(saved).toEqual([...Array.from({ length: 16 }, (_, i) => i), 511]);
    expect(Array.from({ length: 4 }, (_, i) => cachesStep(i, 4))).toEqual([true, true, true, true]);
  });

  test("over the cap, the chains whose newest entry is oldest go first, whole; the kept name never", () => {
    const entries = [entry("old", 100, 1), entry("old", 150, 2), entry("mid", 200, 1), entry("mid", 210, 2), entry("new", 300, 1), entry("mine", 50, 1), entry("mine", 60, 2)];
    const drop = overflow(entries, "mine", 4).map((e) => e.t.template);
    expect(drop).toEqual(["e2b/a/_c-old1", "e2b/a/_c-old2", "e2b/a/_c-mid1", "e2b/a/_c-mid2"]);
    expect(overflow(entries, "mine", 7)).toEqual([]);
    // Only the kept chain left to delete: nothing more is chosen, whatever the cap.
    expect(overflow(entries, "mine", 0).some((e) => e.t.labels?.n === "mine")).toBe(false);
  });

  test("built names count each e2b/<ns>/<name> once across nodes, neither cache entries nor other namespaces", () => {
    const t = (template: string) => ({ template, net: "none", size: "small" }) as FleetTemplate;
    const node = (templates: FleetTemplate[]) => ({ name: "n", address: "n:1", pools: [], entries: [], templates });
    const nodes = { nodes: () => [node([t("e2b/a/app"), t("e2b/a/_c-123"), t("e2b/b/other")]), node([t("e2b/a/app"), t("e2b/a/web"), t("img:1")])] } as unknown as NodeAccess;
    expect([...builtNames(nodes, "a")].sort()).toEqual(["app", "web"]);
  });
});
