// Issue 26 item 7: what the chart renders is what the docs say. helm's renders are exactly seed 003's objects (16,
// 22 with e2b, 23 with the rendered envd secret) plus the objects beyond the seed, each with its reason
// (objects.ts); chart/README.md "Objects" and docs/decisions.md "chart-objects-beyond-seed" state the counts and
// name every object beyond the seed in tables read here, so a stale count or a missing object fails this file.
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { firstCode, plain, section, tableWithHeader, tables, type MarkdownTable } from "#tests/support/markdown.ts";
import { E2B, NAMESPACE, at, identity, merge, render, root, type KubeObject } from "./helm.ts";
import {
  BEYOND_SEED,
  COUNTED_RENDERS,
  SEED_003_DEFAULT,
  SEED_003_E2B,
  SEED_003_ENVD_SECRET,
  beyondIdentity,
  type BeyondSeedObject,
  type CountedRender,
} from "./objects.ts";

const README = readFileSync(join(root, "chart", "README.md"), "utf8");
const DECISIONS = readFileSync(join(root, "docs", "decisions.md"), "utf8");

const ids = (objects: KubeObject[]) => objects.map(identity).sort();
const sorted = (list: string[]) => [...list].sort();
const total = (r: CountedRender) => r.seed.length + r.beyond.length;
const counted = (label: string): CountedRender => {
  const r = COUNTED_RENDERS.find((c) => c.label === label);
  if (!r) throw new Error(`no counted render "${label}"`);
  return r;
};

const COUNTS_HEADER = ["Render", "Objects", "Seed 003", "Beyond seed 003"];
const OBJECTS_HEADER = ["Kind", "Name", "Namespace"];
const BEYOND_HEADER = ["Kind", "Name", "Namespace", "Rendered when", "Why"];

/** A docs table row's object as identity() writes it: "release" is the release namespace, "cluster" none. */
function rowIdentity(row: string[]): string {
  const [kind, name, ns] = [row[0]!, firstCode(row[1]!), plain(row[2]!)];
  if (ns === "cluster") return `${kind} ${name}`;
  return `${kind} ${ns === "release" ? NAMESPACE : ns}/${name}`;
}

/** The table headed Kind | Name | Namespace whose lead-in starts with `lead`. */
function tableWithHeaderAfter(md: string, lead: string): MarkdownTable {
  const hits = tables(md).filter((t) => t.header.join("|") === OBJECTS_HEADER.join("|")).filter((t) => t.lead.startsWith(lead));
  if (hits.length !== 1) throw new Error(`expected one | ${OBJECTS_HEADER.join(" | ")} | table after "${lead}…", found ${hits.length}`);
  return hits[0]!;
}

/** Each row of a counts table: its render is a counted one, and its three numbers are that render's. */
function expectCounts(t: MarkdownTable): string[] {
  const labels: string[] = [];
  for (const row of t.rows) {
    const label = plain(row[0]!);
    const r = COUNTED_RENDERS.find((c) => c.label === label);
    expect(`row "${label}" is a counted render: ${r !== undefined}`).toBe(`row "${label}" is a counted render: true`);
    expect({ label, counts: row.slice(1).map(Number) }).toEqual({ label, counts: [total(r!), r!.seed.length, r!.beyond.length] });
    labels.push(label);
  }
  return labels;
}

/** The beyond-seed table names exactly BEYOND_SEED's objects, each with its scope, the value that renders it and its source. */
function expectBeyondTable(t: MarkdownTable): void {
  const named = (o: BeyondSeedObject) => `${o.kind} ${o.name}`;
  expect(sorted(t.rows.map((r) => `${r[0]} ${firstCode(r[1]!)}`))).toEqual(sorted(BEYOND_SEED.map(named)));
  for (const o of BEYOND_SEED) {
    const row = t.rows.find((r) => r[0] === o.kind && firstCode(r[1]!) === o.name)!;
    expect({ object: named(o), namespace: row[2] }).toEqual({ object: named(o), namespace: o.namespaced ? "release" : "cluster" });
    expect(`${named(o)} rendered when: ${plain(row[3]!)}`).toContain(o.when);
    expect(`${named(o)} why: ${row[4]!.toLowerCase()}`).toContain(o.source);
  }
}

describe("seed 003 and beyond", () => {
  test("seed 003 lists 16 objects, 22 with e2b, 23 with the rendered envd secret, none twice", () => {
    const all = [...SEED_003_DEFAULT, ...SEED_003_E2B, SEED_003_ENVD_SECRET];
    expect([SEED_003_DEFAULT.length, SEED_003_DEFAULT.length + SEED_003_E2B.length, all.length]).toEqual([16, 22, 23]);
    expect(new Set(all).size).toBe(all.length);
  });

  test("each object beyond the seed is not one of the seed's and has a source and a reason", () => {
    const seed = new Set([...SEED_003_DEFAULT, ...SEED_003_E2B, SEED_003_ENVD_SECRET]);
    expect(BEYOND_SEED.map(beyondIdentity).filter((o) => seed.has(o))).toEqual([]);
    expect(new Set(BEYOND_SEED.map(beyondIdentity)).size).toBe(BEYOND_SEED.length);
    for (const o of BEYOND_SEED) {
      expect(o.source).not.toBe("");
      expect(o.why.length).toBeGreaterThan(20);
    }
  });

  test("helm renders 23, 30 and 31 objects: seed 003's 16, 22 and 23 and the objects beyond it", async () => {
    const [plainRender, e2b, secret] = await Promise.all([
      render(),
      render(E2B),
      render(merge(E2B, at("apiserver.e2b.envdSecret", { value: "v", secretName: "" }))),
    ]);
    expect([plainRender.length, e2b.length, secret.length]).toEqual([23, 30, 31]);
    const beyondDefault = BEYOND_SEED.filter((o) => o.in === "default").map(beyondIdentity);
    const beyondAll = BEYOND_SEED.map(beyondIdentity);
    expect(ids(plainRender)).toEqual(sorted([...SEED_003_DEFAULT, ...beyondDefault]));
    expect(ids(e2b)).toEqual(sorted([...SEED_003_DEFAULT, ...SEED_003_E2B, ...beyondAll]));
    expect(ids(secret)).toEqual(sorted([...SEED_003_DEFAULT, ...SEED_003_E2B, SEED_003_ENVD_SECRET, ...beyondAll]));
  });

  for (const r of COUNTED_RENDERS) {
    test(`${r.label}: ${total(r)} objects, seed 003's ${r.seed.length} and ${r.beyond.length} beyond`, async () => {
      expect(ids(await render(r.values, r.options))).toEqual(sorted([...r.seed, ...r.beyond]));
    });
  }
});

describe('chart/README.md "Objects"', () => {
  const objects = section(README, "Objects");

  test("the counts table has every counted render, in order, with its rendered, seed and beyond counts", () => {
    expect(expectCounts(tableWithHeader(objects, COUNTS_HEADER))).toEqual(COUNTED_RENDERS.map((r) => r.label));
  });

  test("the default table is the default render, and its lead-in states its count", async () => {
    const t = tableWithHeaderAfter(objects, "Default render");
    expect(sorted(t.rows.map(rowIdentity))).toEqual(ids(await render()));
    expect(t.lead).toContain(`${total(counted("default"))} objects`);
  });

  test("the e2b table is what e2b adds (the Secret only with envdSecret.value), and its lead-in states both counts", async () => {
    const t = tableWithHeaderAfter(objects, "`apiserver.e2b.enabled` adds");
    const base = ids(await render());
    const withSecret = ids(await render(merge(E2B, at("apiserver.e2b.envdSecret", { value: "v", secretName: "" }))));
    expect(sorted(t.rows.map(rowIdentity))).toEqual(withSecret.filter((o) => !base.includes(o)));
    for (const label of ["apiserver.e2b.enabled (with the values it needs)", "apiserver.e2b.enabled and apiserver.e2b.envdSecret.value"]) {
      expect(t.lead).toContain(`${total(counted(label))} objects`);
    }
  });

  test('"Beyond seed 003" names every object beyond the seed: kind, name, namespace, when it renders and why', () => {
    expectBeyondTable(tableWithHeader(section(objects, "Beyond seed 003"), BEYOND_HEADER));
  });
});

describe('docs/decisions.md "chart-objects-beyond-seed"', () => {
  const entry = section(DECISIONS, "chart-objects-beyond-seed");

  test("states the default, e2b and envd-secret counts (20, 27, 28) beside the seed's, and every count it states is right", () => {
    const labels = expectCounts(tableWithHeader(entry, COUNTS_HEADER));
    expect(labels).toEqual(expect.arrayContaining(["default", "apiserver.e2b.enabled (with the values it needs)", "apiserver.e2b.enabled and apiserver.e2b.envdSecret.value"]));
  });

  test("names every object beyond the seed: kind, name, namespace, when it renders and why", () => {
    expectBeyondTable(tableWithHeader(entry, BEYOND_HEADER));
  });

  test("the chart-crds entry no longer says the chart renders the seed's 16", () => {
    const crds = section(DECISIONS, "chart-crds");
    expect(crds).toContain(`the chart renders ${total(counted("default"))}`);
  });
});
