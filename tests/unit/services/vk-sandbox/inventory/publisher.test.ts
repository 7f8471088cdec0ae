import { describe, expect, test } from "bun:test";
import { FakeClock } from "#shared/clock/index.ts";
import { NodeInventory } from "#shared/inventory/index.ts";
import { buildEntries, buildInventory, InventoryPublisher, SHARD_MAX_BYTES, SHARD_RESYNC_PUBLISHES } from "#services/vk-sandbox/inventory/index.ts";
import { KubeApiError } from "#shared/kube/errors.ts";
import type { Info, SandboxRow } from "#shared/sandboxd/schemas.ts";

const quiet = { info() {}, warn() {}, debug() {}, error() {} };
const key = { template: "base:24.04", net: "none" as const, size: "small" as const };
const info: Info = {
  pools: [{ key, warm: 3, target: 4, refilling: 1, golden: true }],
  templates: [],
  claimed: 2,
  advertise_addr: "10.0.0.5:7777",
};
const rows: SandboxRow[] = [
  { id: "sb_00000000000000b2", key, deadline: "2026-12-01T00:00:00Z", hibernated: false, claim_ref: "ns/zeta", claimed_at: "2026-11-30T00:00:00Z" },
  { id: "sb_00000000000000a1", key, deadline: "0001-01-01T00:00:00Z", hibernated: false, archived: true },
  { id: "sb_00000000000000c3", key, deadline: "2026-12-01T00:00:00Z", hibernated: true, claim_ref: "ns/alpha" },
];
const notFound = () => new KubeApiError({ status: 404, reason: "NotFound", verb: "get", path: "/api/v1/nodes/n" });

describe("buildInventory", () => {
  const inv = buildInventory({
    nodeName: "n",
    address: "10.0.0.5:7777",
    nodeUid: "uid-n",
    rows,
    info,
    ownAddressOf: (id) => (id === "sb_00000000000000b2" ? "10.0.0.5:7777" : undefined),
    publishedAt: new Date("2026-11-30T01:02:03.456Z"),
  });

  test("it validates against the NodeInventory schema", () => {
    expect(NodeInventory.safeParse(inv).success).toBe(true);
  });

  test("entries are sorted by name, named by claim_ref or else id, with phase from hibernated/archived", () => {
    expect(inv.entries!.map((e) => [e.name, e.phase])).toEqual([
      ["ns/alpha", "Hibernated"],
      ["ns/zeta", "Running"],
      ["sb_00000000000000a1", "Hibernated"],
    ]);
  });

  test("addr appears only for this provider's own rows; zero deadlines are omitted", () => {
    const [alpha, zeta, anon] = inv.entries!;
    expect(zeta).toEqual({
      name: "ns/zeta",
      phase: "Running",
      id: "sb_00000000000000b2",
      template: "base:24.04",
      claimRef: "ns/zeta",
      addr: "10.0.0.5:7777",
      deadline: "2026-12-01T00:00:00Z",
      claimedAt: "2026-11-30T00:00:00Z",
    });
    expect(alpha!.addr).toBeUndefined();
    expect(anon!.deadline).toBeUndefined();
    expect(anon!.claimedAt).toBeUndefined();
  });

  test("pools, the owner reference and publishedAt", () => {
    expect(inv.pools).toEqual([{ template: "base:24.04", net: "none", size: "small", warm: 3, target: 4 }]);
    expect(inv.metadata.ownerReferences).toEqual([{ apiVersion: "v1", kind: "Node", name: "n", uid: "uid-n" }]);
    expect(inv.publishedAt).toBe("2026-11-30T01:02:03.456Z");
  });

  test("newer fields: claim metadata as one JSON string, size allocation, promoted templates", () => {
    const inv2 = buildInventory({
      nodeName: "n",
      address: "a",
      rows: [{ ...rows[0]!, metadata: { team: "x" }, cpu_count: 2, mem_total_bytes: 2147483648 }],
      info: {
        ...info,
        templates: [
          { key, content_digest: `sha256:${"a".repeat(64)}`, tenant: "acme", created_at: "2026-11-01T00:00:00Z", cpu_count: 1, mem_total_bytes: 536870912 },
        ],
      },
      ownAddressOf: () => undefined,
      publishedAt: new Date(),
    });
    expect(inv2.entries![0]).toMatchObject({ claimMetadata: '{"team":"x"}', cpuCount: 2, memoryBytes: 2147483648 });
    expect(inv2.templates).toEqual([
      { template: "base:24.04", net: "none", size: "small", contentDigest: `sha256:${"a".repeat(64)}`, tenant: "acme", createdAt: "2026-11-01T00:00:00Z", cpuCount: 1, memoryBytes: 536870912 },
    ]);
    expect(NodeInventory.safeParse(inv2).success).toBe(true);
    expect("claimMetadata" in inv.entries![0]!).toBe(false);
  });

  test("empty lists are omitted so server-side apply clears them", () => {
    const empty = buildInventory({ nodeName: "n", address: "a", rows: [], info: { ...info, pools: [] }, ownAddressOf: () => undefined, publishedAt: new Date() });
    expect("entries" in empty).toBe(false);
    expect("pools" in empty).toBe(false);
    expect("templates" in empty).toBe(false);
    expect(empty.metadata.ownerReferences).toBeUndefined();
  });
});

class Fakes {
  applies: any[] = [];
  gets: any[] = [];
  deletes: string[] = [];
  /** What the empty merge patch of the root answers (the last set a previous run completed); undefined: 404. */
  storedRoot: any = undefined;
  rows: SandboxRow[] = rows;
  node: "present" | "missing" | "error" = "present";
  nodeAddresses: { type: string; address: string }[] = [{ type: "InternalIP", address: "10.0.0.5" }];
  listFails = false;
  infoFails = false;
  kube = {
    get: async (_res: any, name: string, o: any) => {
      this.gets.push({ name, o });
      if (this.node === "missing") throw notFound();
      if (this.node === "error") throw new KubeApiError({ status: 500, reason: "InternalError", verb: "get", path: "/" });
      return { metadata: { name, uid: "uid-n" }, status: { addresses: this.nodeAddresses } } as any;
    },
    patch: async (_res: any, name: string, body: any, o: any) => {
      if (o.type === "merge") {
        if (this.storedRoot === undefined) throw notFound();
        return this.storedRoot;
      }
      this.applies.push({ name, body, o });
      return body;
    },
    delete: async (_res: any, name: string) => {
      this.deletes.push(name);
    },
  };
  sandboxd = {
    list: async () => {
      if (this.listFails) throw new Error("list 500");
      return this.rows;
    },
    info: async () => {
      if (this.infoFails) throw new Error("info 500");
      return info;
    },
  };
}

function publisher(f: Fakes, extra: Partial<ConstructorParameters<typeof InventoryPublisher>[0]> = {}) {
  return new InventoryPublisher({
    kube: f.kube as any,
    sandboxd: f.sandboxd as any,
    nodeName: "n",
    address: "10.0.0.5:7777",
    ownAddresses: () => new Map(),
    intervalMs: 5,
    log: quiet,
    // The seed's scenarios are about the single-object form; the sharded form has its own tests below.
    format: "single",
    ...extra,
  });
}

describe("InventoryPublisher", () => {
  test("issue 22 case 2: an advertised host that is none of the Node's addresses is warned about once (the control plane ignores it), a vouched one never", async () => {
    const warned: string[] = [];
    const log = { ...quiet, warn: (_o: unknown, msg: string) => void warned.push(msg) };
    const f = new Fakes();
    await publisher(f, { log }).publishOnce();
    expect(warned).toEqual([]);
    f.nodeAddresses = [{ type: "Hostname", address: "n" }];
    const p = publisher(f, { log });
    await p.publishOnce();
    await p.publishOnce();
    expect(warned).toHaveLength(1);
    expect(warned[0]).toContain("the control plane ignores this inventory");
  });

  test("it applies server-side as vk-sandbox with force, reading the Node at resourceVersion 0", async () => {
    const f = new Fakes();
    const out = await publisher(f).publishOnce();
    expect(out.published).toBe(true);
    expect(f.gets[0].o).toEqual({ resourceVersion: "0" });
    expect(f.applies[0].o).toEqual({ type: "apply", fieldManager: "vk-sandbox", force: true });
    expect(f.applies[0].body.metadata.ownerReferences[0].uid).toBe("uid-n");
  });

  test("the provider's own addresses are read once per publish and land on their entries only", async () => {
    const f = new Fakes();
    let reads = 0;
    const p = publisher(f, {
      ownAddresses: () => {
        reads++;
        return new Map([["sb_00000000000000b2", "10.0.0.9:7777"]]);
      },
    });
    await p.publishOnce();
    expect(reads).toBe(1);
    const entries = f.applies[0].body.entries as Array<{ id: string; addr?: string }>;
    expect(entries.filter((e) => e.addr).map((e) => [e.id, e.addr])).toEqual([["sb_00000000000000b2", "10.0.0.9:7777"]]);
  });

  test("a failing listing or info skips the apply", async () => {
    const f = new Fakes();
    const p = publisher(f);
    f.listFails = true;
    expect((await p.publishOnce()).published).toBe(false);
    f.listFails = false;
    f.infoFails = true;
    expect((await p.publishOnce()).published).toBe(false);
    expect(f.applies).toHaveLength(0);
  });

  test("a Node never seen is published without an owner; once seen and then missing, nothing is applied", async () => {
    const f = new Fakes();
    const p = publisher(f);
    f.node = "missing";
    expect((await p.publishOnce()).published).toBe(true);
    expect(f.applies[0].body.metadata.ownerReferences).toBeUndefined();
    f.node = "present";
    await p.publishOnce();
    f.node = "missing";
    expect(await p.publishOnce()).toMatchObject({ published: false, reason: "node-gone" });
    expect(f.applies).toHaveLength(2);
  });

  test("a Node read error other than NotFound skips the publish", async () => {
    const f = new Fakes();
    f.node = "error";
    expect(await publisher(f).publishOnce()).toMatchObject({ published: false, reason: "node-read-failed" });
  });

  test("the node controller's gone signal stops publishing without any read", async () => {
    const f = new Fakes();
    expect(await publisher(f, { nodeGone: () => true }).publishOnce()).toMatchObject({ published: false, reason: "node-gone" });
    expect(f.gets).toHaveLength(0);
  });

  test("an apply failure is not fatal: the loop publishes at start and then once per interval", async () => {
    const f = new Fakes();
    let failNext = true;
    const patch = f.kube.patch;
    f.kube.patch = async (...a: Parameters<typeof patch>) => {
      if (failNext && a[3].type === "apply") {
        failNext = false;
        throw new KubeApiError({ status: 500, reason: "InternalError", verb: "apply", path: "/" });
      }
      return patch(...a);
    };
    const clock = new FakeClock();
    const p = publisher(f, { clock, intervalMs: 30_000 });
    p.start();
    await clock.tick(0);
    expect([failNext, p.publishCount]).toEqual([false, 0]); // the first apply ran at start and failed
    await clock.tick(29_999);
    expect(p.publishCount).toBe(0);
    await clock.tick(1);
    expect(p.publishCount).toBe(1);
    await clock.tick(30_000);
    expect(p.publishCount).toBe(2);
    expect(f.applies[1].body.publishedAt).toBe(new Date(clock.now()).toISOString());
    await p.stop();
    await clock.tick(60_000);
    expect(p.publishCount).toBe(2);
  });

  test("a non-positive interval is refused", () => {
    expect(() => publisher(new Fakes(), { intervalMs: 0 })).toThrow(RangeError);
  });
});

/** `n` rows of the largest metadata sandboxd accepts (16 pairs, 4 KiB as JSON), claim refs `team/sbx-<i>`. */
function bigRows(n: number, from = 0): SandboxRow[] {
  return Array.from({ length: n }, (_, j) => {
    const i = from + j;
    const metadata = Object.fromEntries(Array.from({ length: 16 }, (_, k) => [`k${String(k).padStart(2, "0")}`, `${i}-${k}-`.padEnd(240, "v")]));
    return { id: `sb_${i.toString(16).padStart(16, "0")}`, key, deadline: "2026-12-01T00:00:00Z", hibernated: false, claim_ref: `team/sbx-${i}`, claimed_at: "2026-11-30T00:00:00Z", metadata };
  });
}

describe("InventoryPublisher, sharded form (issue 29)", () => {
  const sharded = (f: Fakes, extra: Partial<ConstructorParameters<typeof InventoryPublisher>[0]> = {}) => publisher(f, { format: "sharded", ...extra });
  const shardApplies = (f: Fakes) => f.applies.filter((a) => a.body.kind === "NodeInventoryShard");
  const rootApplies = (f: Fakes) => f.applies.filter((a) => a.body.kind === "NodeInventory");

  test("2,000 rows of the largest metadata: shards each under the cap, applied before a root that lists no rows and names the set", async () => {
    const f = new Fakes();
    f.rows = bigRows(2000);
    const out = await sharded(f).publishOnce();
    expect(out.published).toBe(true);
    const shards = shardApplies(f);
    expect(shards.length).toBeGreaterThan(16);
    expect(f.applies.at(-1)!.body.kind).toBe("NodeInventory");
    const root = f.applies.at(-1)!.body;
    expect(root.entries).toEqual([]);
    expect(root.shards).toEqual({ generation: 1, count: shards.length });
    expect(JSON.stringify(root).length).toBeLessThan(4096);
    for (const a of shards) {
      expect(Buffer.byteLength(JSON.stringify(a.body))).toBeLessThanOrEqual(SHARD_MAX_BYTES);
      expect(a.name).toBe(`n.1.${a.body.index}`);
      expect(a.o).toEqual({ type: "apply", fieldManager: "vk-sandbox", force: true });
      expect(a.body.metadata.ownerReferences).toEqual([{ apiVersion: "v1", kind: "Node", name: "n", uid: "uid-n" }]);
    }
    const union = shards.flatMap((a) => a.body.entries ?? []).sort((x: any, y: any) => (x.name < y.name ? -1 : x.name > y.name ? 1 : 0));
    expect(union).toEqual(buildEntries(f.rows, () => undefined));
    if (out.published) expect(out.sizes).toMatchObject({ format: "sharded", rows: 2000, shards: shards.length, appliedObjects: shards.length + 1 });
  });

  test("publishing costs what changed: nothing changed is the root alone; one release rewrites one shard", async () => {
    const f = new Fakes();
    f.rows = bigRows(2000);
    const p = sharded(f);
    await p.publishOnce();
    f.applies = [];
    const steady = await p.publishOnce();
    expect(f.applies.map((a) => a.body.kind)).toEqual(["NodeInventory"]);
    if (steady.published) expect(steady.sizes.appliedBytes).toBeLessThan(4096);
    f.rows = f.rows.filter((r) => r.id !== f.rows[777]!.id);
    f.applies = [];
    await p.publishOnce();
    expect(shardApplies(f)).toHaveLength(1);
    expect(rootApplies(f)).toHaveLength(1);
    expect(f.deletes).toEqual([]);
  });

  test("a count change writes a new generation whole, then the root, then deletes the old set", async () => {
    const f = new Fakes();
    f.rows = bigRows(10);
    const p = sharded(f);
    await p.publishOnce();
    expect(rootApplies(f)[0].body.shards).toEqual({ generation: 1, count: 1 });
    f.rows = bigRows(400);
    f.applies = [];
    await p.publishOnce();
    const root = rootApplies(f)[0].body;
    expect(root.shards.generation).toBe(2);
    expect(shardApplies(f).map((a) => a.name)).toEqual(Array.from({ length: root.shards.count }, (_, i) => `n.2.${i}`));
    expect(f.deletes).toEqual(["n.1.0"]);
  });

  test("a restarted node continues after the set its root names, and deletes that set", async () => {
    const f = new Fakes();
    f.rows = bigRows(3);
    f.storedRoot = { apiVersion: "sandbox.cocoonstack.io/v1beta1", kind: "NodeInventory", metadata: { name: "n" }, node: "n", shards: { generation: 5, count: 2 } };
    await sharded(f).publishOnce();
    expect(rootApplies(f)[0].body.shards).toEqual({ generation: 6, count: 1 });
    expect(f.deletes.sort()).toEqual(["n.5.0", "n.5.1"]);
  });

  test("a failed shard apply leaves the root unapplied (publishedAt stalls) and is retried next publish", async () => {
    const f = new Fakes();
    f.rows = bigRows(400);
    const patch = f.kube.patch;
    let fail = true;
    f.kube.patch = async (...a: Parameters<typeof patch>) => {
      if (fail && a[1] === "n.1.1") throw new KubeApiError({ status: 500, reason: "InternalError", verb: "apply", path: "/" });
      return patch(...a);
    };
    const p = sharded(f);
    expect(await p.publishOnce()).toMatchObject({ published: false, reason: "apply-failed" });
    expect(rootApplies(f)).toHaveLength(0);
    fail = false;
    f.applies = [];
    expect((await p.publishOnce()).published).toBe(true);
    expect(shardApplies(f).map((a) => a.name)).toContain("n.1.1");
    expect(rootApplies(f)).toHaveLength(1);
  });

  test("a cluster without the shard CRD (404) or the shard RBAC (403): the single form meanwhile, said once, and shards as soon as they are taken", async () => {
    for (const status of [404, 403]) {
      const f = new Fakes();
      f.rows = bigRows(3);
      const patch = f.kube.patch;
      let refuse = true;
      f.kube.patch = async (...a: Parameters<typeof patch>) => {
        if (refuse && a[0].resource === "nodeinventoryshards") throw new KubeApiError({ status, reason: status === 404 ? "NotFound" : "Forbidden", verb: "apply", path: "/" });
        return patch(...a);
      };
      const warned: string[] = [];
      const p = sharded(f, { log: { ...quiet, warn: (_o: unknown, msg: string) => void warned.push(msg) } });
      expect((await p.publishOnce()).published).toBe(true);
      expect((await p.publishOnce()).published).toBe(true);
      const roots = rootApplies(f);
      expect(roots).toHaveLength(2);
      expect(roots[0].body.entries).toHaveLength(3);
      expect(roots[0].body.shards).toBeUndefined();
      expect(warned.filter((m) => m.includes("cannot publish NodeInventoryShards"))).toHaveLength(1);
      refuse = false;
      f.applies = [];
      await p.publishOnce();
      expect(rootApplies(f)[0].body.shards?.count).toBe(1);
      expect(shardApplies(f)).toHaveLength(1);
    }
  });

  test("a node name with no room for `.<generation>.<index>` within 253 characters publishes the single form", async () => {
    const f = new Fakes();
    f.rows = bigRows(2);
    const long = "n".repeat(248); // 248 + ".1.1023" is past 253
    const out = await sharded(f, { nodeName: long }).publishOnce();
    expect(out.published).toBe(true);
    expect(shardApplies(f)).toHaveLength(0);
    expect(rootApplies(f)[0].body.entries).toHaveLength(2);
  });

  test(`every ${SHARD_RESYNC_PUBLISHES} publishes every shard is applied again, so one removed by hand comes back`, async () => {
    const f = new Fakes();
    f.rows = bigRows(400);
    const p = sharded(f);
    let counts: number[] = [];
    for (let i = 0; i <= SHARD_RESYNC_PUBLISHES; i++) {
      f.applies = [];
      await p.publishOnce();
      counts.push(shardApplies(f).length);
    }
    const n = counts[0]!;
    expect(counts.filter((c) => c === n)).toHaveLength(2);
    expect(counts.filter((c) => c === 0)).toHaveLength(SHARD_RESYNC_PUBLISHES - 1);
  });
});

describe("InventoryPublisher, the size warning", () => {
  test("a single-form node past the warning size says so once per crossing: log line and Event on its Node naming node and size, and the sizes", async () => {
    const f = new Fakes();
    f.rows = bigRows(150);
    const warnings: { o: any; msg: string }[] = [];
    const events: { obj: any; reason: string; message: string }[] = [];
    const sizes: number[] = [];
    const p = publisher(f, {
      log: { ...quiet, warn: (o: unknown, msg: string) => void warnings.push({ o, msg }) },
      events: { warning: (obj, reason, message) => void events.push({ obj, reason, message }) },
      observe: (s) => void sizes.push(s.largestObjectBytes),
    });
    await p.publishOnce();
    await p.publishOnce();
    expect(sizes[0]).toBeGreaterThan(512 * 1024);
    const w = warnings.filter((x) => x.msg.includes("past the warning size"));
    expect(w).toHaveLength(1);
    expect(w[0]!.o).toMatchObject({ node: "n", bytes: sizes[0], rows: 150, format: "single" });
    expect(w[0]!.msg).toContain("--inventory-format=sharded");
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ obj: { kind: "Node", metadata: { name: "n", uid: "uid-n" } }, reason: "InventoryNearLimit" });
    expect(events[0]!.message).toContain(`${sizes[0]} bytes`);
    // Back under 90% of the size re-arms it; past it again warns again.
    f.rows = bigRows(10);
    await p.publishOnce();
    f.rows = bigRows(150);
    await p.publishOnce();
    expect(events).toHaveLength(2);
  });

  test("the sharded form at full capacity stays under the warning size", async () => {
    const f = new Fakes();
    f.rows = bigRows(2000);
    const events: unknown[] = [];
    const out = await publisher(f, { format: "sharded", events: { warning: (o) => void events.push(o) } }).publishOnce();
    expect(events).toEqual([]);
    if (out.published) expect(out.sizes.largestObjectBytes).toBeLessThan(512 * 1024);
  });
});
