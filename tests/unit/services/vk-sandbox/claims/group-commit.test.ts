import { describe, expect, test } from "bun:test";
import { GroupCommit } from "#services/vk-sandbox/claims/group-commit.ts";
import { gate } from "../provider/helpers.ts";

describe("group commit", () => {
  test("commits made together share one write", async () => {
    const writes: string[][] = [];
    const gc = new GroupCommit<string>(async (tags) => void writes.push([...tags]));
    await Promise.all(["a", "b", "c"].map((t) => gc.commit(t)));
    expect(writes).toEqual([["a", "b", "c"]]);
  });

  test("a commit made while a write is in flight waits for the next write, which includes it", async () => {
    const first = gate();
    const snapshots: string[][] = [];
    const rows: string[] = [];
    let n = 0;
    const gc = new GroupCommit<string>(async (tags) => {
      snapshots.push([...rows]);
      if (n++ === 0) await first.promise;
      void tags;
    });
    rows.push("a");
    const a = gc.commit("a");
    await Promise.resolve();
    await Promise.resolve();
    rows.push("b");
    let bDone = false;
    const b = gc.commit("b").then(() => (bDone = true));
    first.open();
    await a;
    // a's write started before b's row existed: it must not report b durable.
    expect(snapshots[0]).toEqual(["a"]);
    await b;
    expect(bDone).toBe(true);
    expect(snapshots[1]).toEqual(["a", "b"]);
  });

  test("writes never overlap", async () => {
    let active = 0;
    let maxActive = 0;
    const gc = new GroupCommit<number>(async () => {
      active++;
      maxActive = Math.max(maxActive, active);
      await new Promise((r) => setImmediate(r));
      active--;
    });
    const all: Promise<void>[] = [];
    for (let i = 0; i < 50; i++) {
      all.push(gc.commit(i));
      if (i % 7 === 0) await new Promise((r) => setImmediate(r));
    }
    await Promise.all(all);
    expect(maxActive).toBe(1);
    expect(gc.writes).toBeLessThan(50);
  });

  test("a failed write rejects its own batch only", async () => {
    let n = 0;
    const hold = gate();
    const gc = new GroupCommit<string>(async () => {
      if (n++ === 0) {
        await hold.promise;
        throw new Error("disk full");
      }
    });
    const a = gc.commit("a");
    await Promise.resolve();
    await Promise.resolve();
    const b = gc.commit("b");
    hold.open();
    await expect(a).rejects.toThrow("disk full");
    await expect(b).resolves.toBeUndefined();
  });

  test("idle resolves once nothing is pending", async () => {
    const gc = new GroupCommit<string>(async () => {});
    void gc.commit("x");
    await gc.idle();
    expect(gc.writes).toBe(1);
  });
});
