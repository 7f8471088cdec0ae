import { describe, expect, test } from "bun:test";
import { COMBINED_PREFIX, EventGate, MISSING_NAMESPACE_TTL_MS, NamespaceAwareSink, NamespaceMissingError, sandboxEventsCounter, startSandboxEvents, transitionOf } from "#services/sandbox-apiserver/events/index.ts";
import type { ChangeListener, SandboxChange } from "#services/sandbox-apiserver/sandboxes/changes.ts";
import { sandboxFromEntry } from "#services/sandbox-apiserver/sandboxes/object.ts";
import { FakeClock } from "#shared/clock/index.ts";
import type { InventoryRecord } from "#shared/fleet/index.ts";
import { EventRecorder, isNotFound, KubeApiError } from "#shared/kube/index.ts";
import { Registry } from "#shared/metrics/index.ts";

const sb = (phase: "Running" | "Hibernated", node = "n1") => sandboxFromEntry({ name: "a/x", id: "sb_x", phase }, node);
const change = (before: ReturnType<typeof sb>[], after: ReturnType<typeof sb>[]): SandboxChange => ({ key: "a/x", namespace: "a", before, after });
const moment = (before: string[], after: string[], lost = false) => ({ freshBefore: new Set(before), freshAfter: new Set(after), wasLost: () => lost });

describe("transitions from inventory changes", () => {
  test("appearing on a fresh node is Claimed; on a node that just (re)joined, nothing; after a loss, Recovered", () => {
    expect(transitionOf(change([], [sb("Running")]), moment(["n1"], ["n1"]))).toMatchObject({ reason: "Claimed", type: "Normal", message: 'claimed on node "n1" (claim id sb_x)' });
    expect(transitionOf(change([], [sb("Running")]), moment([], ["n1"]))).toBeUndefined();
    expect(transitionOf(change([], [sb("Running")]), moment([], ["n1"], true))?.reason).toBe("Recovered");
  });
  test("Running → Hibernated is Paused, back is Resumed; other changes (a deadline) are nothing", () => {
    expect(transitionOf(change([sb("Running")], [sb("Hibernated")]), moment(["n1"], ["n1"]))?.reason).toBe("Paused");
    expect(transitionOf(change([sb("Hibernated")], [sb("Running")]), moment(["n1"], ["n1"]))?.reason).toBe("Resumed");
    expect(transitionOf(change([sb("Running")], [sb("Running")]), moment(["n1"], ["n1"]))).toBeUndefined();
  });
  test("gone while its node is fresh is Released; gone with its node stale or removed is a Lost Warning", () => {
    expect(transitionOf(change([sb("Running")], []), moment(["n1"], ["n1"]))?.reason).toBe("Released");
    expect(transitionOf(change([sb("Running")], []), moment(["n1"], []))).toMatchObject({ reason: "Lost", type: "Warning" });
  });
});

describe("the event gate", () => {
  test("an object's burst is 25, then one event per 5 minutes", () => {
    const clock = new FakeClock();
    const gate = new EventGate({ clock });
    let admitted = 0;
    for (let i = 0; i < 100; i++) if (gate.admit("a/x", "Normal", i % 2 ? "Paused" : "Resumed", "m") !== undefined) admitted++;
    expect(admitted).toBe(25);
    expect(gate.counts.droppedObject).toBe(75);
    clock.advance(300_000);
    expect(gate.admit("a/x", "Normal", "Paused", "m")).toBeDefined();
    expect(gate.admit("a/x", "Normal", "Paused", "m")).toBeUndefined();
    // Another object has its own bucket.
    expect(gate.admit("a/y", "Normal", "Paused", "m")).toBe("m");
  });
  test("past 10 similar events in 10 minutes the message is one constant combined text", () => {
    const gate = new EventGate({ clock: new FakeClock() });
    const out = Array.from({ length: 14 }, (_, i) => gate.admit("a/x", "Normal", "Claimed", `claim ${i}`));
    expect(out.slice(0, 10)).toEqual(Array.from({ length: 10 }, (_, i) => `claim ${i}`));
    expect(new Set(out.slice(10))).toEqual(new Set([`${COMBINED_PREFIX}claim 10`]));
  });
  test("the process bucket bounds every object together, and the per-object and per-namespace state is bounded", () => {
    const gate = new EventGate({ clock: new FakeClock(), processQps: 1, processBurst: 5, maxObjects: 100, maxNamespaces: 50 });
    let admitted = 0;
    for (let i = 0; i < 1000; i++) if (gate.admit(`ns${i}/s${i}`, "Normal", "Claimed", "m") !== undefined) admitted++;
    expect(admitted).toBe(5);
    expect(gate.counts.droppedProcess).toBe(995);
    expect(gate.size).toBe(100);
    expect(gate.namespaceCount).toBe(50);
  });
  test("one namespace's churn takes at most its own bucket (burst 40, 5/s), leaving the process bucket to others", () => {
    const clock = new FakeClock();
    const gate = new EventGate({ clock });
    let a = 0;
    for (let i = 0; i < 1000; i++) if (gate.admit(`a/s${i}`, "Normal", i % 2 ? "Released" : "Claimed", "m") !== undefined) a++;
    expect(a).toBe(40);
    expect(gate.counts.droppedNamespace).toBe(960);
    expect(gate.admit("b/z", "Warning", "Lost", "lost")).toBe("lost");
    clock.advance(1000);
    let more = 0;
    for (let i = 0; i < 100; i++) if (gate.admit(`a/t${i}`, "Normal", "Claimed", "m") !== undefined) more++;
    expect(more).toBe(5);
  });
});

describe("startSandboxEvents", () => {
  test("transitions after the start are recorded on the Sandbox, only while this replica is active, and counted", async () => {
    let listener: ChangeListener = () => {};
    let nodes = [{ name: "n1" }] as InventoryRecord[];
    const changes = { subscribe: (fn: ChangeListener) => ((listener = fn), () => {}), current: () => nodes };
    const written: { obj: unknown; reason: string }[] = [];
    let active = true;
    const registry = new Registry();
    startSandboxEvents({
      changes,
      writer: { record: (obj, _t, reason) => written.push({ obj, reason }) },
      gate: new EventGate({ clock: new FakeClock(), objectBurst: 3 }),
      active: () => active,
      isMissingNamespace: (ns) => ns === "gone",
      counter: sandboxEventsCounter(registry),
    });
    const batch = (c: SandboxChange) => listener({ changes: new Map([[c.key, c]]), memo: (_o, _k, make) => make() });
    batch(change([], [sb("Running")]));
    expect(written).toEqual([{ obj: { apiVersion: "agents.x-k8s.io/v1beta1", kind: "Sandbox", metadata: { name: "x", namespace: "a" } }, reason: "Claimed" }]);
    active = false;
    batch(change([sb("Running")], [sb("Hibernated")]));
    expect(written).toHaveLength(1);
    active = true;
    nodes = [];
    batch(change([sb("Hibernated")], []));
    nodes = [{ name: "n1" }] as InventoryRecord[];
    batch(change([], [sb("Hibernated")]));
    expect(written.map((w) => w.reason)).toEqual(["Claimed", "Lost", "Recovered"]);
    // The object's burst (3 here) is spent: the next transition is counted as rate limited, not written.
    batch(change([sb("Hibernated")], [sb("Running")]));
    expect(written).toHaveLength(3);
    batch({ key: "gone/y", namespace: "gone", before: [], after: [sandboxFromEntry({ name: "gone/y", phase: "Running" }, "n1")] });
    const text = await registry.metrics();
    expect(text).toContain('sandbox_apiserver_sandbox_events_total{reason="Claimed",outcome="recorded"} 1');
    expect(text).toContain('sandbox_apiserver_sandbox_events_total{reason="Resumed",outcome="rate_limited"} 1');
    expect(text).toContain('sandbox_apiserver_sandbox_events_total{reason="Claimed",outcome="namespace_missing"} 1');
  });
});

describe("a namespace's churn does not starve another namespace's warnings", () => {
  test("namespace a claims and releases 1,000 sandboxes, then a Lost in namespace b is still written", () => {
    let listener: ChangeListener = () => {};
    let nodes = [{ name: "n1" }, { name: "n2" }] as InventoryRecord[];
    const changes = { subscribe: (fn: ChangeListener) => ((listener = fn), () => {}), current: () => nodes };
    const written: { key: string; reason: string }[] = [];
    const gate = new EventGate({ clock: new FakeClock() });
    startSandboxEvents({
      changes,
      writer: { record: (obj, _t, reason) => written.push({ key: `${obj.metadata?.namespace}/${obj.metadata?.name}`, reason }) },
      gate,
      active: () => true,
    });
    const batch = (c: SandboxChange) => listener({ changes: new Map([[c.key, c]]), memo: (_o, _k, make) => make() });
    for (let i = 0; i < 500; i++) {
      const s = sandboxFromEntry({ name: `a/s${i}`, id: `sb_${i}`, phase: "Running" }, "n1");
      batch({ key: `a/s${i}`, namespace: "a", before: [], after: [s] });
      batch({ key: `a/s${i}`, namespace: "a", before: [s], after: [] });
    }
    expect(written.filter((w) => w.key.startsWith("a/"))).toHaveLength(40);
    nodes = [{ name: "n1" }] as InventoryRecord[];
    batch({ key: "b/z", namespace: "b", before: [sandboxFromEntry({ name: "b/z", id: "sb_z", phase: "Running" }, "n2")], after: [] });
    expect(written.at(-1)).toEqual({ key: "b/z", reason: "Lost" });
  });
});

describe("events in a namespace Kubernetes does not have", () => {
  test("writes queued before the first 404 came back are skipped without a call as they leave the queue", async () => {
    const clock = new FakeClock();
    let calls = 0;
    const sink = new NamespaceAwareSink(
      {
        create: async (ns) => {
          calls++;
          await Bun.sleep(1);
          throw new KubeApiError({ status: 404, verb: "create", path: `/api/v1/namespaces/${ns}/events`, reason: "NotFound", message: `namespaces "${ns}" not found` });
        },
        patch: async () => ({}),
      },
      clock,
    );
    const failures: string[] = [];
    const recorder = new EventRecorder({ sink, component: "test", clock, isNotFound, log: { warn: (o) => failures.push(String((o as { err: string }).err)) } });
    for (let i = 0; i < 20; i++) recorder.record({ apiVersion: "v1", kind: "Sandbox", metadata: { name: `s${i}`, namespace: "e2b-team" } }, "Normal", "Claimed", "m");
    await recorder.flush();
    // Only the writes already in flight when the first 404 returned (the recorder's concurrency) reached the API.
    expect(calls).toBeGreaterThanOrEqual(1);
    expect(calls).toBeLessThanOrEqual(4);
    expect(sink.counts.skipped).toBe(20 - calls);
    expect(failures.filter((f) => f.includes("NamespaceMissingError"))).toHaveLength(20 - calls);
    expect(new NamespaceMissingError("x").message).toContain('namespace "x"');
  });

  test("a 404 on create marks the namespace missing for a minute; other errors do not", async () => {
    const clock = new FakeClock();
    let calls = 0;
    const sink = new NamespaceAwareSink(
      {
        create: async (ns) => {
          calls++;
          if (ns === "e2b-team") throw new KubeApiError({ status: 404, verb: "create", path: `/api/v1/namespaces/${ns}/events`, reason: "NotFound", message: `namespaces "${ns}" not found` });
          if (ns === "flaky") throw new Error("connection reset");
          return {};
        },
        patch: async () => ({}),
      },
      clock,
    );
    await expect(sink.create("e2b-team", {} as never)).rejects.toThrow();
    expect(sink.isMissing("e2b-team")).toBe(true);
    await expect(sink.create("flaky", {} as never)).rejects.toThrow("connection reset");
    expect(sink.isMissing("flaky")).toBe(false);
    await sink.create("real", {} as never);
    expect(sink.isMissing("real")).toBe(false);
    clock.advance(MISSING_NAMESPACE_TTL_MS);
    expect(sink.isMissing("e2b-team")).toBe(false);
    expect(calls).toBe(3);
  });
});
