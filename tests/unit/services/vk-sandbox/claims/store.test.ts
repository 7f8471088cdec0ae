import { describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ClaimsFile, ClaimsStore, type Claim } from "#services/vk-sandbox/claims/index.ts";

const T0 = Date.UTC(2026, 6, 27, 2, 15, 0);
const row = (id: string): Claim => ({ id, token: `tok-${id}`, podUID: `uid-${id}`, claimedAt: T0 }) as Claim;

function fresh() {
  const path = join(mkdtempSync(join(tmpdir(), "claims-store-")), "claims.json");
  return { path, store: new ClaimsStore(new ClaimsFile({ path })) };
}

describe("ClaimsStore", () => {
  test("a commit writes what the source gives for its batch, and landed runs once the file holds it", async () => {
    const { path, store } = fresh();
    const seen: string[][] = [];
    let landedWith: string | undefined;
    store.setSource((included) => {
      seen.push([...included]);
      return {
        table: { claims: [["ns/a", row("sb_a")]], releasing: [row("sb_r")] },
        landed: () => void (landedWith = readFileSync(path, "utf8")),
      };
    });
    await Promise.all([store.commit("sb_a"), store.commit()]);
    expect(seen).toEqual([["sb_a"]]); // two concurrent commits, one write
    expect(store.writes).toBe(1);
    const onDisk = JSON.parse(readFileSync(path, "utf8"));
    expect(Object.keys(onDisk.claims)).toEqual(["ns/a"]);
    expect(onDisk.releasing.map((r: { id: string }) => r.id)).toEqual(["sb_r"]);
    expect(landedWith).toBe(readFileSync(path, "utf8"));
  });

  test("load reads back what a commit wrote; a missing file is an empty table", async () => {
    const { path, store: s } = fresh();
    expect((await s.load(T0)).claims.size).toBe(0);
    s.setSource(() => ({ table: { claims: [["ns/a", row("sb_a")]], releasing: [] }, landed: () => {} }));
    await s.commit();
    const back = await new ClaimsStore(new ClaimsFile({ path })).load(T0);
    expect(back.claims.get("ns/a")?.id).toBe("sb_a");
    expect(s.path).toBe(path);
  });

  test("a commit before the source is set rejects instead of writing an empty table", async () => {
    const { store: s } = fresh();
    await expect(s.commit()).rejects.toThrow(/before a source/);
  });
});
