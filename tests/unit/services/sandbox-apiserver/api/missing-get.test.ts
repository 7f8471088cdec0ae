// A Get of a name no inventory holds (issue 22 case 5): it may still ask the nodes live (a sandbox another replica
// claimed a moment ago, scenario 17), but no longer once per node on every Get: names that cannot exist never go
// live, concurrent and repeated misses share one fan-out, and fan-outs come from a per-replica budget, after which the
// inventory view decides (404).
import { describe, expect, test } from "bun:test";
import { FakeClock } from "#shared/clock/index.ts";
import type { InventoryRecord } from "#shared/fleet/index.ts";
import type { SandboxRow } from "#shared/sandboxd/index.ts";
import { SandboxChanges } from "#services/sandbox-apiserver/sandboxes/changes.ts";
import { LIVE_FANOUT_BURST, LIVE_FANOUT_QPS, LiveLookupGate, MISS_TTL_MS } from "#services/sandbox-apiserver/sandboxes/live-gate.ts";
import type { NodeClients } from "#services/sandbox-apiserver/sandboxes/nodes.ts";
import { SandboxReader } from "#services/sandbox-apiserver/sandboxes/store.ts";
import { apiRoutes } from "#services/sandbox-apiserver/api/routes.ts";

const NODES = 50;

function setup(rows: Record<string, SandboxRow> = {}) {
  const clock = new FakeClock();
  const records = Array.from({ length: NODES }, (_, i) => ({ name: `n${i}`, address: `10.0.0.${i}:8080`, inventory: { node: `n${i}`, entries: [] } }) as unknown as InventoryRecord);
  const fleet = { fresh: () => records, freshNode: (n: string) => records.find((r) => r.name === n), onChange: () => () => {} };
  const calls: string[] = [];
  const clients = {
    for: (address: string) => ({
      list: async (q: { claimRef: string }) => {
        calls.push(`${address} ${q.claimRef}`);
        const row = address === "10.0.0.7:8080" ? rows[q.claimRef] : undefined;
        return row ? [row] : [];
      },
    }),
  } as unknown as NodeClients;
  const reader = new SandboxReader(fleet, clients, new LiveLookupGate(clock));
  return { clock, reader, calls, fleet };
}

describe("a Get of a missing name does not fan out to every node", () => {
  test("100 distinct missing names cost at most the budget's fan-outs, and tokens return with time", async () => {
    const s = setup();
    for (let i = 0; i < 100; i++) expect(await s.reader.resolve("team", `junk-${i}`)).toBeUndefined();
    // Before: 100 × 50 = 5,000 root-token calls. Now: the burst's fan-outs only.
    expect(s.calls).toHaveLength(LIVE_FANOUT_BURST * NODES);
    s.calls.length = 0;
    s.clock.advance(1000);
    for (let i = 100; i < 200; i++) await s.reader.resolve("team", `junk-${i}`);
    expect(s.calls).toHaveLength(LIVE_FANOUT_QPS * NODES);
  });

  test("concurrent Gets of one missing name share one fan-out; a repeat within the miss TTL asks nobody; after it, asks again", async () => {
    const s = setup();
    await Promise.all(Array.from({ length: 20 }, () => s.reader.resolve("team", "ghost")));
    expect(s.calls).toHaveLength(NODES);
    await s.reader.resolve("team", "ghost");
    expect(s.calls).toHaveLength(NODES);
    s.clock.advance(MISS_TTL_MS);
    await s.reader.resolve("team", "ghost");
    expect(s.calls).toHaveLength(2 * NODES);
  });

  test("names that cannot exist never reach a node", async () => {
    const s = setup();
    for (const [ns, name] of [["team", "Bad_Name"], ["team", "a..b"], ["team", "x".repeat(254)], ["Team", "ok"], ["a/b", "ok"], ["team", "-lead"]] as const) {
      expect(await s.reader.resolve(ns, name)).toBeUndefined();
    }
    expect(s.calls).toHaveLength(0);
  });

  test("scenario 17 still holds: a sandbox only its node knows is found live, and then by the index without a fan-out", async () => {
    const row = { id: "sb_17", key: { template: "img", net: "", size: "small" }, hibernated: false, claim_ref: "default/seventeen" } as unknown as SandboxRow;
    const s = setup({ "default/seventeen": row });
    const hit = await s.reader.resolve("default", "seventeen");
    expect(hit?.node).toBe("n7");
    const before = s.calls.length;
    expect((await s.reader.resolve("default", "seventeen"))?.node).toBe("n7");
    expect(s.calls.length - before).toBe(1); // the indexed node alone, live
  });

  test("through the route: over budget, a missing name is a 404 Status decided from the inventory view", async () => {
    const s = setup();
    const changes = new SandboxChanges({ fleet: s.fleet, sandboxesOf: (rec) => s.reader.sandboxesOf(rec), clock: s.clock });
    const app = apiRoutes({ reader: s.reader, changes, create: {} as never, podGuard: {} as never, clock: s.clock, shutdown: new AbortController().signal, version: () => ({}) });
    for (let i = 0; i < LIVE_FANOUT_BURST; i++) await s.reader.resolve("team", `spend-${i}`);
    const before = s.calls.length;
    const res = await app.fetch(new Request("https://x/apis/agents.x-k8s.io/v1beta1/namespaces/team/sandboxes/nobody"));
    expect(res.status).toBe(404);
    expect(await res.json()).toMatchObject({ kind: "Status", reason: "NotFound", details: { name: "nobody" } });
    expect(s.calls.length).toBe(before);
    changes.stop();
  });
});
