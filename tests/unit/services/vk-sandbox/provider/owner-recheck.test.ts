import { describe, expect, test } from "bun:test";

import { join } from "node:path";
import { FakeClock, FakeOwners, harness, makeSandboxd, pod, readTable, scratchDirs } from "./helpers.ts";

const tmp = scratchDirs();
const statePath = () => join(tmp(), "claims.json");

async function preserved(path: string) {
  const clock = new FakeClock();
  const h = await harness({ path, clock, sandboxd: await makeSandboxd(clock) });
  h.owners!.alive("sb1", "owner-sb1");
  await h.p.createPod(pod());
  await h.p.deletePod(pod());
  return h;
}

describe("owner re-check", () => {
  test("a preserved row whose owner is deleted later is released on the next tick", async () => {
    const path = statePath();
    const h = await preserved(path);
    const id = readTable(path).claims["default/sb1"].id;
    h.owners!.gone("sb1");
    await h.impl.tick("owner-recheck");
    expect(h.sandboxd.released).toEqual([id]);
    expect(readTable(path)).toEqual({ claims: {} });
  });

  test("a live owner is read at +10 s, +20 s, +40 s and so on, capped at 10 minutes", async () => {
    const h = await preserved(statePath());
    const readsAt: number[] = [];
    const t0 = h.clock.now();
    for (let s = 0; s <= 3000; s += 10) {
      const before = h.owners!.reads.n;
      await h.impl.tick("owner-recheck");
      if (h.owners!.reads.n > before) readsAt.push((h.clock.now() - t0) / 1000);
      h.clock.advance(10_000);
    }
    const gaps = readsAt.slice(1).map((t, i) => t - readsAt[i]!);
    expect(gaps.slice(0, 6)).toEqual([10, 20, 40, 80, 160, 320]);
    expect(gaps.slice(6).every((g) => g === 600)).toBe(true);
    expect(h.sandboxd.releaseCalls.n).toBe(0);
  });

  test("the move to releasing is on disk before the release is attempted", async () => {
    const path = statePath();
    const h = await preserved(path);
    const id = readTable(path).claims["default/sb1"].id;
    let onDisk: unknown;
    h.sandboxd.onRelease = () => (onDisk = readTable(path));
    h.owners!.gone("sb1");
    await h.impl.tick("owner-recheck");
    expect(onDisk).toMatchObject({ claims: {}, releasing: [{ id }] });
  });

  test("a failing queued release keeps its credential across a restart and repeats each tick until it succeeds", async () => {
    const path = statePath();
    const h = await preserved(path);
    const row = readTable(path).claims["default/sb1"];
    h.owners!.gone("sb1");
    h.sandboxd.failReleases(true);
    await h.impl.tick("owner-recheck");
    await h.impl.tick("owner-recheck");
    expect(h.sandboxd.releaseCalls.n).toBe(2);
    expect(readTable(path).releasing).toEqual([expect.objectContaining({ id: row.id, token: row.token })]);
    await h.stop(); // a clean stop tries the pending release once more (it still fails)
    expect(h.sandboxd.releaseCalls.n).toBe(3);

    // Restart against the same node: the releasing list comes back and is drained.
    const h2 = await harness({ path, clock: h.clock, sandboxd: h.sandboxd, owners: new FakeOwners() });
    expect(h2.impl.core.st.releasing.map((e) => e.claim.id)).toEqual([row.id]);
    await h2.impl.tick("owner-recheck");
    expect(h.sandboxd.releaseCalls.n).toBe(4);
    h.sandboxd.failReleases(false);
    await h2.impl.tick("owner-recheck");
    expect(h.sandboxd.released).toEqual([row.id]);
    expect(readTable(path).releasing).toBeUndefined();
  });

  test("a queued release answered 404 counts as done", async () => {
    const path = statePath();
    const h = await preserved(path);
    h.sandboxd.vanishAll();
    h.owners!.gone("sb1");
    await h.impl.tick("owner-recheck");
    expect(h.impl.core.st.releasing).toHaveLength(0);
    expect(readTable(path)).toEqual({ claims: {} });
  });

  test("a row adopted by a replacement pod is no longer re-checked", async () => {
    const h = await preserved(statePath());
    await h.p.createPod(pod({ uid: "replacement" }));
    h.owners!.gone("sb1");
    await h.impl.tick("owner-recheck");
    expect(h.owners!.reads.n).toBe(1); // only the delete's read
    expect(h.sandboxd.releaseCalls.n).toBe(0);
  });

  test("a queued release is not acted on while the table cannot be written", async () => {
    const path = statePath();
    const h = await preserved(path);
    h.owners!.gone("sb1");
    const { rmSync, writeFileSync, mkdirSync } = await import("node:fs");
    const dir = join(path, "..");
    rmSync(dir, { recursive: true, force: true });
    writeFileSync(dir, "blocker");
    await h.impl.tick("owner-recheck");
    expect(h.sandboxd.releaseCalls.n).toBe(0);
    expect(h.impl.core.st.releasing).toHaveLength(1);
    rmSync(dir);
    mkdirSync(dir);
    await h.impl.tick("owner-recheck");
    expect(h.sandboxd.released).toHaveLength(1);
  });
});

describe("issue 7 case 10: a swap back to the upstream Go daemon", () => {
  test("a clean stop tries the pending releases first: the upstream loader would drop the releasing list", async () => {
    const path = statePath();
    const h = await preserved(path);
    const row = readTable(path).claims["default/sb1"];
    h.owners!.gone("sb1");
    h.sandboxd.failReleases(true);
    await h.impl.tick("owner-recheck"); // moved to releasing (on disk), its release fails
    expect(readTable(path).releasing).toHaveLength(1);
    h.sandboxd.failReleases(false);
    await h.stop();
    expect(h.sandboxd.released).toEqual([row.id]);
    expect(readTable(path).releasing).toBeUndefined();
  });
});

describe("issue 7 safety net: the owner re-check's guard", () => {
  test("a release verdict that arrives after a Pod adopted the key meanwhile does not detach the claim", async () => {
    const path = statePath();
    const h = await preserved(path);
    const id = readTable(path).claims["default/sb1"].id;
    // The owner read is slow, and by the time it answers "gone" a same-owner Pod has adopted the claim.
    let open!: () => void;
    const answered = new Promise<void>((r) => (open = r));
    let reading!: () => void;
    const started = new Promise<void>((r) => (reading = r));
    Object.defineProperty(h.impl.core, "ownerReader", {
      value: async (ref: { name: string }) => {
        reading();
        await answered;
        return { outcome: "not-found", detailsName: ref.name };
      },
    });
    const tick = h.impl.tick("owner-recheck");
    await started;
    await h.p.createPod(pod()); // adopts: same key, same owner
    expect(h.p.getPod("default", "sb1")).toBeDefined();
    open();
    await tick;
    expect(h.sandboxd.releaseCalls.n).toBe(0);
    expect(h.impl.core.st.releasing).toHaveLength(0);
    expect(readTable(path).claims["default/sb1"].id).toBe(id);
    expect(h.sandboxd.has(id)).toBe(true);
  });
});
