// A delete the controller hands over for a Pod the provider never stored (the row was loaded at startup and no Pod
// adopted it yet) acts only when that Pod could have adopted the row (§5.3 adoption). A stale Pod of the same key
// (an earlier or a foreign incarnation, another authority) never releases the row's VM: the sandbox belongs to
// the Pod the row records, which may still come back.
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { bare, FakeClock, FakeOwners, harness, makeSandboxd, pod, readTable, scratchDirs } from "./helpers.ts";

const tmp = scratchDirs();

/** A row claimed for `first`, then a restart: the row is on disk and the new provider holds no Pod for it. */
async function restartedWithRow(first: ReturnType<typeof pod>) {
  const path = join(tmp(), "claims.json");
  const clock = new FakeClock(Date.UTC(2026, 6, 27, 2, 15, 0));
  const sandboxd = await makeSandboxd(clock);
  const owners = new FakeOwners();
  const before = await harness({ path, clock, sandboxd, owners });
  await before.p.createPod(first);
  await before.stop();
  const row = readTable(path).claims["default/sb1"];
  const h = await harness({ path, clock, sandboxd, owners });
  await h.impl.tick("verify");
  return { path, row, h, sandboxd };
}

describe("a delete of a Pod that could not adopt the row", () => {
  test("a bare Pod of the same key with another UID: the row's sandbox is not released", async () => {
    const { path, row, h, sandboxd } = await restartedWithRow(bare({ uid: "uid-first" }));
    expect(h.p.getPod("default", "sb1")).toBeUndefined();
    await h.p.deletePod(bare({ uid: "uid-stranger" }));
    expect(sandboxd.releaseCalls.n).toBe(0);
    expect(sandboxd.has(row.id)).toBe(true);
    expect(readTable(path).claims["default/sb1"]).toMatchObject({ id: row.id, token: row.token });
    // The Pod the row records still releases it: the guard is about who, not a refusal of every delete.
    await h.p.deletePod(bare({ uid: "uid-first" }));
    expect(sandboxd.released).toEqual([row.id]);
    expect(readTable(path).claims).toEqual({});
  });

  test("an owned Pod of another authority whose owner is gone: still not released", async () => {
    const { path, row, h, sandboxd } = await restartedWithRow(pod({ uid: "uid-first" }));
    // The stranger's owner reads as not found, which would release were the Pod allowed to act on the row.
    await h.p.deletePod(pod({ uid: "uid-stranger", owner: { name: "other", uid: "owner-other" } }));
    expect(sandboxd.releaseCalls.n).toBe(0);
    expect(readTable(path).claims["default/sb1"]?.id).toBe(row.id);
  });
});
