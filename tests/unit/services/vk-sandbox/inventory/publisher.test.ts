import { describe, expect, test } from "bun:test";
import { FakeClock } from "#shared/clock/index.ts";
import { NodeInventory } from "#shared/inventory/index.ts";
import { buildInventory, InventoryPublisher } from "#services/vk-sandbox/inventory/index.ts";
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
      this.applies.push({ name, body, o });
      return body;
    },
  };
  sandboxd = {
    list: async () => {
      if (this.listFails) throw new Error("list 500");
      return rows;
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
      if (failNext) {
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
