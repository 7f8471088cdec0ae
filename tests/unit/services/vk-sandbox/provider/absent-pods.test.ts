// Rows whose Pod was deleted while the daemon was down (provider/absent-pods.ts): judged once the pod cache
// synced, as DeletePod would have judged the Pod. The e2e proof on a real apiserver is
// tests/e2e/vk-sandbox/offline-delete.test.ts; these cover the branches that test cannot reach cheaply.
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { writeFileSync } from "node:fs";
import { FakeClock, FakeOwners, harness, makeSandboxd, pod, readTable, scratchDirs } from "./helpers.ts";

const tmp = scratchDirs();
const absent = () => false;

async function claimedThenRestarted(o: { owned: boolean }) {
  const path = join(tmp(), "claims.json");
  const clock = new FakeClock(Date.UTC(2026, 6, 27, 2, 15, 0));
  const sandboxd = await makeSandboxd(clock);
  const owners = new FakeOwners();
  const first = await harness({ path, clock, sandboxd, owners });
  await first.p.createPod(pod(o.owned ? {} : { owner: null }));
  const row = readTable(path).claims["default/sb1"];
  const second = await harness({ path, clock, sandboxd, owners });
  return { path, row, h: second };
}

describe("rows whose Pod was deleted while the daemon was down", () => {
  test("a bare Pod's row whose release fails stays on the persisted releasing list with its token, and the tick releases it later", async () => {
    const { path, row, h } = await claimedThenRestarted({ owned: false });
    h.sandboxd.failReleases(true);
    await h.impl.releaseAbsent(absent);
    await h.impl.tick("owner-recheck"); // drains run one after another: the startup drain has finished here
    expect(h.sandboxd.released).toEqual([]);
    expect(readTable(path)).toEqual({ claims: {}, releasing: [expect.objectContaining({ id: row.id, token: row.token })] });

    h.sandboxd.failReleases(false);
    await h.impl.tick("owner-recheck");
    expect(h.sandboxd.released).toEqual([row.id]);
    expect(readTable(path)).toEqual({ claims: {} });
  });

  test("a Pod the synced cache still holds is not touched", async () => {
    const { path, row, h } = await claimedThenRestarted({ owned: false });
    await h.impl.releaseAbsent((key) => key === "default/sb1");
    await h.impl.tick("owner-recheck");
    expect(h.sandboxd.releaseCalls.n).toBe(0);
    expect(readTable(path).claims["default/sb1"]).toEqual(row);
  });

  test("an owned Pod's row records the controller reference and is preserved for that owner; released once the owner is gone", async () => {
    const { path, row, h } = await claimedThenRestarted({ owned: true });
    expect(row.controller).toMatchObject({ kind: "Sandbox", name: "sb1", uid: "owner-sb1" });
    h.owners!.alive("sb1", "owner-sb1");
    await h.impl.releaseAbsent(absent);
    expect(readTable(path).claims["default/sb1"].owner).toMatchObject({ kind: "Sandbox", name: "sb1", uid: "owner-sb1" });
    await h.impl.tick("owner-recheck");
    expect(h.sandboxd.releaseCalls.n).toBe(0);

    h.owners!.gone("sb1");
    h.clock.advance(10_000);
    await h.impl.tick("owner-recheck");
    expect(h.sandboxd.released).toEqual([row.id]);
    expect(readTable(path)).toEqual({ claims: {} });
  });

  test("an owned row from an older table (no controller recorded) and a legacy row (no authority) are kept", async () => {
    const path = join(tmp(), "claims.json");
    const clock = new FakeClock(Date.UTC(2026, 6, 27, 2, 15, 0));
    const sandboxd = await makeSandboxd(clock);
    const first = await harness({ path, clock, sandboxd });
    await first.p.createPod(pod({ name: "owned" }));
    await first.p.createPod(pod({ name: "legacy", owner: null }));
    const table = readTable(path);
    delete table.claims["default/owned"].controller;
    delete table.claims["default/legacy"].authority;
    writeFileSync(path, JSON.stringify(table));
    const h = await harness({ path, clock, sandboxd });
    await h.impl.releaseAbsent(absent);
    await h.impl.tick("owner-recheck");
    expect(h.sandboxd.releaseCalls.n).toBe(0);
    expect(Object.keys(readTable(path).claims).sort()).toEqual(["default/legacy", "default/owned"]);
    expect(readTable(path).claims["default/owned"].owner).toBeUndefined();
  });
});
