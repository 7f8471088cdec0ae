// Read your own template writes (shared/e2b/template-writes.ts): a build's promote and a template delete are what
// this replica's next Template.exists, create target, list and detail see, while the fleet snapshot still lags
// (here: a snapshot that never changes, as between two inventory publishes). Hand-made snapshots, a fake clock.
import { describe, expect, test } from "bun:test";
import { FakeClock } from "#shared/clock/index.ts";
import type { FleetNode, FleetSource, FleetTemplate } from "#shared/fleet/index.ts";
import { createLogger } from "#shared/log/index.ts";
import { NodeAccess } from "#shared/e2b/nodes.ts";
import { OWN_WRITE_MS } from "#shared/e2b/own-writes.ts";
import { TEMPLATE_WRITES_PER_NAMESPACE, TRUST_AFTER_MS, TemplateWrites } from "#shared/e2b/template-writes.ts";
import { TemplateCatalog } from "#shared/e2b/templates.ts";

const A = "127.0.0.1:1";
const B = "127.0.0.1:2";
const built = (name: string, digest: string, extra: Partial<FleetTemplate> = {}): FleetTemplate => ({
  template: `e2b/team-a/${name}`,
  net: "none",
  size: "small",
  contentDigest: digest,
  createdAt: 1_700_000_000_000,
  ...extra,
});
const node = (address: string, templates: FleetTemplate[] = []): FleetNode => ({
  name: `node-${address}`,
  address,
  pools: [{ template: "img", net: "none", size: "small", warm: 1, target: 1 }],
  templates,
  entries: [],
});
const staticFleet = (nodes: () => FleetNode[]): FleetSource => ({ nodes, ready: async () => undefined, stop: async () => undefined });

function setup(snapshot: FleetNode[]) {
  const clock = new FakeClock();
  let current = snapshot;
  const access = new NodeAccess(staticFleet(() => current), "root", createLogger({ level: "error" }), clock);
  const catalog = new TemplateCatalog(access, new Map(), new Map(), "0.2.0");
  return { clock, access, catalog, set: (n: FleetNode[]) => void (current = n) };
}

describe("a build's promote, seen by this replica before the snapshot lists it", () => {
  test("Template.exists, the create target (by name and name:tag), the list and the detail see it at once", () => {
    const { access, catalog } = setup([node(A), node(B)]);
    expect(() => catalog.templateAlias("team-a", "app")).toThrow(/not found/);
    access.templateWrites.published(A, built("app", "d1", { labels: { v1: "d1" } }));
    expect(catalog.templateAlias("team-a", "app")).toEqual({ templateID: "app", public: true });
    expect(catalog.createHolders("team-a", "app").map((h) => h.node.address)).toEqual([A]);
    expect(catalog.createHolders("team-a", "app:v1").map((h) => h.t.contentDigest)).toEqual(["d1"]);
    expect(catalog.createHolders("team-a", "app:v2")).toEqual([]);
    expect(catalog.templates("team-a").map((t) => t.templateID)).toEqual(["img", "app"]);
    expect(catalog.templateDetail("team-a", "app").builds).toHaveLength(1);
    // Another namespace's key sees nothing of it.
    expect(() => catalog.templateAlias("team-b", "app")).toThrow(/not found/);
  });

  test("the older holders a rebuild deleted are gone for the next read; a newer digest elsewhere is left alone", () => {
    const { access, catalog } = setup([node(A, [built("app", "old")]), node(B, [built("app", "old")])]);
    access.templateWrites.deleted([{ address: A, template: built("app", "old") }]);
    access.templateWrites.published(B, built("app", "new"));
    expect(catalog.createHolders("team-a", "app").map((h) => `${h.node.address}:${h.t.contentDigest}`)).toEqual([`${B}:new`]);
  });

  test("a delete hides every holder it removed; a rebuild afterwards shows again", () => {
    const { access, catalog } = setup([node(A, [built("app", "d1")])]);
    access.templateWrites.deleted([{ address: A, template: built("app", "d1") }]);
    expect(() => catalog.templateAlias("team-a", "app")).toThrow(/not found/);
    expect(() => catalog.templateDetail("team-a", "app")).toThrow();
    access.templateWrites.published(A, built("app", "d2"));
    expect(catalog.createHolders("team-a", "app").map((h) => h.t.contentDigest)).toEqual(["d2"]);
  });

  test("a write gives way once the snapshot shows it, and after OWN_WRITE_MS in any case", () => {
    const { clock, access, catalog, set } = setup([node(A)]);
    access.templateWrites.published(A, built("app", "d1"));
    // The snapshot catches up, then changes again elsewhere (deleted by another replica): its word now.
    set([node(A, [built("app", "d1")])]);
    expect(catalog.createHolders("team-a", "app")).toHaveLength(1);
    set([node(A)]);
    expect(catalog.createHolders("team-a", "app")).toEqual([]);
    // A write the snapshot never shows ends with OWN_WRITE_MS.
    access.templateWrites.published(A, built("other", "d9"));
    expect(catalog.createHolders("team-a", "other")).toHaveLength(1);
    clock.advance(OWN_WRITE_MS);
    expect(catalog.createHolders("team-a", "other")).toEqual([]);
  });

  test("with no write the snapshot is returned as it is (the create path pays nothing)", () => {
    const snapshot = [node(A)];
    const { access } = setup(snapshot);
    expect(access.nodes()).toBe(snapshot);
  });

  test("a namespace keeps at most TEMPLATE_WRITES_PER_NAMESPACE writes, its own oldest dropped first; another namespace's stay", () => {
    const w = new TemplateWrites(new FakeClock());
    w.published(A, { ...built("other", "o1"), template: "e2b/team-b/other" });
    for (let i = 0; i <= TEMPLATE_WRITES_PER_NAMESPACE; i++) w.published(A, built(`t${i}`, `d${i}`));
    const names = w.overlay([node(A)])[0]!.templates.map((t) => t.template);
    expect(names.filter((n) => n.startsWith("e2b/team-a/"))).toHaveLength(TEMPLATE_WRITES_PER_NAMESPACE);
    expect(names).not.toContain("e2b/team-a/t0");
    expect(names).toContain(`e2b/team-a/t${TEMPLATE_WRITES_PER_NAMESPACE}`);
    expect(names).toContain("e2b/team-b/other");
  });
});

describe("the snapshot's word wins once it has seen the node after the write", () => {
  const at = (n: FleetNode, publishedAt: number): FleetNode => ({ ...n, publishedAt });

  test("another replica rebuilt on the same node: a snapshot stamped after the write shows its digest, not ours", () => {
    const { clock, access, catalog, set } = setup([at(node(A), 0)]);
    const t = clock.now();
    access.templateWrites.published(A, built("app", "mine"));
    set([at(node(A, [built("app", "theirs")]), t + TRUST_AFTER_MS - 1)]);
    // A poll that may have begun before the write: still ours.
    expect(catalog.createHolders("team-a", "app").map((h) => h.t.contentDigest)).toEqual(["mine"]);
    set([at(node(A, [built("app", "theirs")]), t + TRUST_AFTER_MS)]);
    expect(catalog.createHolders("team-a", "app").map((h) => h.t.contentDigest)).toEqual(["theirs"]);
  });

  test("a delete recorded from a digest-less inventory does not hide a rebuild the node reports later", () => {
    const noDigest = { ...built("app", "x"), contentDigest: undefined } as FleetTemplate;
    const { clock, access, catalog, set } = setup([at(node(A, [noDigest]), 0)]);
    const t = clock.now();
    access.templateWrites.deleted([{ address: A, template: noDigest }]);
    expect(catalog.createHolders("team-a", "app")).toEqual([]);
    set([at(node(A, [noDigest]), t + TRUST_AFTER_MS)]);
    expect(catalog.createHolders("team-a", "app")).toHaveLength(1);
  });

  test("two promotes of one key on one node before the snapshot showed the first: the second is what is seen", () => {
    const { access, catalog, set } = setup([node(A)]);
    access.templateWrites.published(A, built("app", "d1"));
    access.templateWrites.published(A, built("app", "d2"));
    expect(catalog.createHolders("team-a", "app").map((h) => h.t.contentDigest)).toEqual(["d2"]);
    // The snapshot catches up with d2: nothing of d1 comes back.
    set([node(A, [built("app", "d2")])]);
    expect(catalog.createHolders("team-a", "app").map((h) => h.t.contentDigest)).toEqual(["d2"]);
  });

  test("a label write after the promote (tags) replaces the promote's labels, and agreement needs the labels too", () => {
    const { access, catalog, set } = setup([node(A)]);
    access.templateWrites.published(A, built("app", "d1", { labels: { v1: "d1" } }));
    // A view polled between the promote and its label write: same digest, no labels yet. Not agreement.
    set([node(A, [built("app", "d1")])]);
    expect(catalog.createHolders("team-a", "app:v1")).toHaveLength(1);
    access.templateWrites.published(A, built("app", "d1", { labels: { v1: "d1", v2: "d1" } }));
    expect(catalog.createHolders("team-a", "app:v2")).toHaveLength(1);
  });

  test("with an unchanged snapshot array the overlay is computed once (the create path's repeated reads)", () => {
    const snapshot = [node(A)];
    const { access } = setup(snapshot);
    access.templateWrites.published(A, built("app", "d1"));
    expect(access.nodes()).toBe(access.nodes());
  });
});
