// The read-your-writes overlay (shared/e2b/own-writes.ts) and the idempotency key helpers, on a fake clock and
// hand-made fleet snapshots: what each write does to the next list, when it gives way to the snapshot, and its bounds.
import { describe, expect, test } from "bun:test";
import { FakeClock } from "#shared/clock/index.ts";
import type { FleetEntry, FleetNode } from "#shared/fleet/index.ts";
import { bodyFingerprint, idempotencyKeyOf } from "#shared/e2b/idempotency.ts";
import { OWN_WRITE_MS, OWN_WRITES_MAX, OWN_WRITES_PER_NAMESPACE, OwnWrites, type ListedRow } from "#shared/e2b/own-writes.ts";
import { clientMetadata } from "#shared/e2b/surface-metadata.ts";

const node = (entries: Partial<FleetEntry>[]): FleetNode[] => [
  {
    name: "n1",
    address: "127.0.0.1:1",
    pools: [],
    templates: [],
    entries: entries.map((e) => ({ id: "sb_x", name: "team-a/e2b-x", namespace: "team-a", phase: "Running", ...e })),
  },
];
const row = (claimId: string, paused = false): ListedRow => ({
  claimId,
  nodeName: "n1",
  template: "img:1",
  claimedAt: undefined,
  deadline: undefined,
  paused,
  cpuCount: 2,
  memoryBytes: 1 << 30,
  metadata: undefined,
});
const view = (w: OwnWrites, nodes: FleetNode[], ns = "team-a") => w.rows(nodes, ns).map((r) => `${r.claimId}:${r.paused ? "paused" : "running"}`);

describe("OwnWrites", () => {
  test("a created sandbox lists at once, in its namespace only, until the snapshot lists it", () => {
    const w = new OwnWrites(new FakeClock());
    w.created("team-a", row("sb_1"));
    expect(view(w, node([]))).toEqual(["sb_1:running"]);
    expect(view(w, node([]), "team-b")).toEqual([]);
    // Caught up, then the snapshot's word: it shows paused (paused elsewhere), and so does the list.
    expect(view(w, node([{ id: "sb_1", name: "team-a/e2b-1" }]))).toEqual(["sb_1:running"]);
    expect(view(w, node([{ id: "sb_1", name: "team-a/e2b-1", phase: "Hibernated" }]))).toEqual(["sb_1:paused"]);
  });

  test("a created sandbox the snapshot first lists asleep (its node hibernated it when idle) lists paused at once", () => {
    const w = new OwnWrites(new FakeClock());
    w.created("team-a", row("sb_1"));
    // No list ran while it was awake: the first snapshot that lists it already shows it hibernated.
    expect(view(w, node([{ id: "sb_1", name: "team-a/e2b-1", phase: "Hibernated" }]))).toEqual(["sb_1:paused"]);
    // ...and a pause through this replica before the snapshot listed it still outranks a snapshot from before it.
    w.created("team-a", row("sb_2"));
    w.paused("team-a", "sb_2");
    w.resumed("team-a", "sb_2");
    expect(view(w, node([{ id: "sb_2", name: "team-a/e2b-2", phase: "Hibernated" }]))).toEqual(["sb_2:running"]);
  });

  test("a kill hides the listed sandbox and answers isKilled (either id form) until the snapshot drops it", () => {
    const w = new OwnWrites(new FakeClock());
    const listed = node([{ id: "sb_2", name: "team-a/e2b-2" }]);
    w.killed("team-a", "sb_2");
    expect(view(w, listed)).toEqual([]);
    expect(w.isKilled("team-a", "sb-2")).toBe(true);
    expect(w.isKilled("team-b", "sb_2")).toBe(false);
    expect(view(w, node([]))).toEqual([]);
    expect(w.isKilled("team-a", "sb_2")).toBe(false);
  });

  test("pause and resume override the snapshot's phase until it agrees; a pause of an unlisted create changes its row", () => {
    const w = new OwnWrites(new FakeClock());
    const running = node([{ id: "sb_3", name: "team-a/e2b-3" }]);
    w.paused("team-a", "sb_3");
    expect(view(w, running)).toEqual(["sb_3:paused"]);
    expect(view(w, node([{ id: "sb_3", name: "team-a/e2b-3", phase: "Hibernated" }]))).toEqual(["sb_3:paused"]);
    // The write is gone: a snapshot that says running now is believed.
    expect(view(w, running)).toEqual(["sb_3:running"]);
    w.created("team-a", row("sb_4"));
    w.paused("team-a", "sb_4");
    expect(view(w, node([]))).toEqual(["sb_4:paused"]);
    // A snapshot from between the create and the pause does not undo the pause.
    expect(view(w, node([{ id: "sb_4", name: "team-a/e2b-4" }]))).toEqual(["sb_4:paused"]);
  });

  test("every write expires after OWN_WRITE_MS; a created one at its lease end if sooner", () => {
    const clock = new FakeClock();
    const w = new OwnWrites(clock);
    w.created("team-a", row("sb_5"));
    w.created("team-a", { ...row("sb_6"), deadline: clock.now() + 5_000 });
    w.killed("team-a", "sb_7");
    clock.advance(5_001);
    expect(view(w, node([]))).toEqual(["sb_5:running"]);
    clock.advance(OWN_WRITE_MS);
    expect(view(w, node([{ id: "sb_7", name: "team-a/e2b-7" }]))).toEqual(["sb_7:running"]);
    expect(w.isKilled("team-a", "sb_7")).toBe(false);
  });

  test(`at most ${OWN_WRITES_PER_NAMESPACE} writes are kept per namespace, its own oldest dropped first`, () => {
    const w = new OwnWrites(new FakeClock());
    for (let i = 0; i <= OWN_WRITES_PER_NAMESPACE; i++) w.killed("team-a", `sb_${i}`);
    expect(w.isKilled("team-a", "sb_0")).toBe(false);
    expect(w.isKilled("team-a", "sb_1")).toBe(true);
    expect(w.isKilled("team-a", `sb_${OWN_WRITES_PER_NAMESPACE}`)).toBe(true);
    expect(w.size("team-a")).toBe(OWN_WRITES_PER_NAMESPACE);
  });

  test("one tenant's create -> kill flood never evicts another tenant's writes, even past the replica-wide bound", () => {
    const w = new OwnWrites(new FakeClock());
    w.created("quiet", row("sb_quiet"));
    w.killed("quiet", "sb_gone");
    // Enough flooding namespaces to pass the replica-wide bound: each is held to its own share.
    const flooders = Math.ceil(OWN_WRITES_MAX / OWN_WRITES_PER_NAMESPACE) + 2;
    for (let f = 0; f < flooders; f++) for (let i = 0; i < OWN_WRITES_PER_NAMESPACE + 50; i++) w.killed(`flood-${f}`, `sb_${f}_${i}`);
    expect(w.size()).toBeLessThanOrEqual(OWN_WRITES_MAX);
    expect(w.isKilled("quiet", "sb_gone")).toBe(true);
    expect(view(w, node([]), "quiet")).toEqual(["sb_quiet:running"]);
  });
});

describe("Idempotency-Key helpers", () => {
  test("keys are 1-255 of [a-z0-9-]; anything else is a 400 naming the header", () => {
    expect(idempotencyKeyOf(undefined)).toBeUndefined();
    expect(idempotencyKeyOf("a-1")).toBe("a-1");
    expect(idempotencyKeyOf("a".repeat(255))).toBe("a".repeat(255));
    for (const bad of ["", "A", "a.b", "a_b", "a b", "a".repeat(256), "é"]) {
      expect(() => idempotencyKeyOf(bad)).toThrow(expect.objectContaining({ status: 400, message: expect.stringContaining("Idempotency-Key") }));
    }
  });

  test("the body fingerprint ignores field order and undefined fields, and sees every value", () => {
    const a = bodyFingerprint({ templateID: "base", metadata: { a: "1", b: "2" }, timeout: 60 });
    expect(bodyFingerprint({ timeout: 60, metadata: { b: "2", a: "1" }, templateID: "base", envVars: undefined })).toBe(a);
    expect(bodyFingerprint({ templateID: "base", metadata: { a: "1", b: "3" }, timeout: 60 })).not.toBe(a);
    expect(bodyFingerprint({ templateID: "base", metadata: { a: "1", b: "2" } })).not.toBe(a);
    expect(a).toMatch(/^[0-9a-f]{32}$/);
  });

  test("clients never see the surface's own metadata stamps", () => {
    expect(clientMetadata({ job: "7", "e2b-surface.idempotency": "k.f.n" })).toEqual({ job: "7" });
    const plain = { job: "7" };
    expect(clientMetadata(plain)).toBe(plain);
    expect(clientMetadata(undefined)).toBeUndefined();
  });
});
