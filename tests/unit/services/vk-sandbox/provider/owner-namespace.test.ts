// The owner of a Pod lives in the Pod's namespace: the delete-time owner read and the owner re-check of a
// preserved row both ask that namespace, never "default" (FakeOwners answers only the namespace it is asked, so a
// same-named owner elsewhere is a different object, as on a real apiserver).
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { FakeClock, harness, makeSandboxd, pod, readTable, scratchDirs } from "./helpers.ts";

const tmp = scratchDirs();

async function teamPod() {
  const path = join(tmp(), "claims.json");
  const clock = new FakeClock(Date.UTC(2026, 6, 27, 2, 15, 0));
  const h = await harness({ path, clock, sandboxd: await makeSandboxd(clock) });
  // The owner is alive in team; a Sandbox of the same name in default is gone (never existed).
  h.owners!.alive("sb1", "owner-sb1", {}, "team");
  await h.p.createPod(pod({ ns: "team" }));
  const id = readTable(path).claims["team/sb1"].id as string;
  return { h, path, id };
}

describe("owner reads use the Pod's namespace", () => {
  test("deleting a Pod whose owner is alive in its namespace preserves the claim (a same-named owner gone from default does not release it)", async () => {
    const { h, path, id } = await teamPod();
    await h.p.deletePod(pod({ ns: "team" }));
    expect(h.owners!.namespaces).toEqual(["team"]);
    expect(h.sandboxd.releaseCalls.n).toBe(0);
    expect(h.sandboxd.has(id)).toBe(true);
    expect(readTable(path).claims["team/sb1"]).toMatchObject({ id, owner: { name: "sb1", uid: "owner-sb1" } });
  });

  test("the owner re-check of a preserved row reads its namespace: alive there keeps it, gone there releases it", async () => {
    const { h, path, id } = await teamPod();
    await h.p.deletePod(pod({ ns: "team" }));
    await h.impl.tick("owner-recheck");
    expect(h.owners!.namespaces).toEqual(["team", "team"]);
    expect(h.sandboxd.releaseCalls.n).toBe(0);
    expect(readTable(path).claims["team/sb1"]?.id).toBe(id);

    h.owners!.gone("sb1", "team");
    h.clock.advance(10_000);
    await h.impl.tick("owner-recheck");
    expect(h.owners!.namespaces).toEqual(["team", "team", "team"]);
    expect(h.sandboxd.released).toEqual([id]);
    expect(readTable(path)).toEqual({ claims: {} });
  });
});
