// The directory store's bounds per namespace (attacker review M4, issue 17): a stored archive is never overwritten,
// a namespace's bytes and archives are capped (its own oldest archives make room, never recent ones, never another
// namespace's), and PUTs in flight are capped in all and per namespace. The count is kept (issue 27): a PUT reads no
// directory, other replicas' archives count from the next rescan, and folders left empty are removed.
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DirUploadStore } from "#shared/e2b/uploads/index.ts";
import { EVICT_MIN_AGE_MS, RESCAN_MS } from "#shared/e2b/uploads/dir-quota.ts";
import { FakeClock, realClock } from "#shared/clock/index.ts";

const root = mkdtempSync(join(tmpdir(), "e2b-dir-quota-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const h = (c: string) => c.repeat(64);
const body = (text: string) => new Blob([text]).stream();
const limits = { nsBytes: 25, nsArchives: 3, putsInFlight: 3, nsPutsInFlight: 2 };
const age = (p: string) => {
  const old = new Date(Date.now() - EVICT_MIN_AGE_MS - 60_000);
  utimesSync(p, old, old);
};

describe("DirUploadStore bounds", () => {
  test("a PUT to a stored archive is a 200 that changes nothing", async () => {
    const store = new DirUploadStore(join(root, "a"), "s", 10, realClock, limits);
    expect((await store.write("ns", "app", h("a"), 5, body("first"))).status).toBe(200);
    expect((await store.write("ns", "app", h("a"), 6, body("second"))).status).toBe(200);
    expect(readFileSync(join(root, "a", "ns", "app", `${h("a")}.tar`), "utf8")).toBe("first");
    // Two PUTs racing past the presence check: the first to finish keeps the archive, the other is a 200 too.
    const held: ReadableStreamDefaultController<Uint8Array>[] = [];
    const slow = () => new ReadableStream<Uint8Array>({ start: (c) => void held.push(c) });
    const one = store.write("ns", "app", h("b"), 3, slow());
    const two = store.write("ns", "app", h("b"), 3, slow());
    held[1]!.enqueue(Buffer.from("two"));
    held[1]!.close();
    expect((await two).status).toBe(200);
    held[0]!.enqueue(Buffer.from("one"));
    held[0]!.close();
    expect((await one).status).toBe(200);
    expect(readFileSync(join(root, "a", "ns", "app", `${h("b")}.tar`), "utf8")).toBe("two");
    expect(readdirSync(join(root, "a", "ns", "app")).sort()).toEqual([`${h("a")}.tar`, `${h("b")}.tar`]);
  });

  test("a namespace over its bytes: 429 while its archives are recent; its oldest make room once aged; another namespace is untouched", async () => {
    const dir = join(root, "b");
    const store = new DirUploadStore(dir, "s", 10, realClock, limits);
    expect((await store.write("ns", "app", h("1"), 10, body("0123456789"))).status).toBe(200);
    expect((await store.write("ns", "app", h("2"), 10, body("0123456789"))).status).toBe(200);
    expect((await store.write("other", "app", h("1"), 10, body("0123456789"))).status).toBe(200);
    const over = await store.write("ns", "app", h("3"), 10, body("0123456789"));
    expect(over.status).toBe(429);
    expect(over.status === 429 && over.message).toContain("namespace ns holds 20 bytes in 2 uploaded archives (at most 25 bytes and 3 archives");
    // An undeclared length reserves the whole bound (10): 20 + 10 > 25 as well.
    expect((await store.write("ns", "app", h("3"), undefined, body("x"))).status).toBe(429);
    age(join(dir, "ns", "app", `${h("1")}.tar`));
    age(join(dir, "other", "app", `${h("1")}.tar`));
    expect((await store.write("ns", "app", h("3"), 10, body("0123456789"))).status).toBe(200);
    expect(existsSync(join(dir, "ns", "app", `${h("1")}.tar`))).toBe(false);
    expect(existsSync(join(dir, "ns", "app", `${h("2")}.tar`))).toBe(true);
    expect(existsSync(join(dir, "other", "app", `${h("1")}.tar`))).toBe(true);
  });

  test("a namespace over its archive count is refused the same way", async () => {
    const store = new DirUploadStore(join(root, "c"), "s", 10, realClock, { ...limits, nsBytes: 1000 });
    for (const c of ["1", "2", "3"]) expect((await store.write("ns", "t", h(c), 1, body("x"))).status).toBe(200);
    const r = await store.write("ns", "t", h("4"), 1, body("x"));
    expect(r.status).toBe(429);
    expect(r.status === 429 && r.message).toContain("3 uploaded archives");
  });

  test("PUTs in flight are capped per namespace and in all", async () => {
    const store = new DirUploadStore(join(root, "d"), "s", 10, realClock, limits);
    const held: ReadableStreamDefaultController<Uint8Array>[] = [];
    const slow = () => new ReadableStream<Uint8Array>({ start: (c) => void held.push(c) });
    const a = store.write("ns", "t", h("1"), 1, slow());
    const b = store.write("ns", "t", h("2"), 1, slow());
    const third = await store.write("ns", "t", h("3"), 1, body("x"));
    expect(third).toEqual({ status: 429, message: "namespace ns already has 2 uploads in progress (at most 2); retry" });
    const c = store.write("other", "t", h("1"), 1, slow());
    expect(await store.write("more", "t", h("1"), 1, body("x"))).toEqual({ status: 429, message: "3 uploads already in progress on this server; retry" });
    for (const ctl of held) {
      ctl.enqueue(new Uint8Array([120]));
      ctl.close();
    }
    expect((await Promise.all([a, b, c])).map((r) => r.status)).toEqual([200, 200, 200]);
    expect((await store.write("ns", "t", h("3"), 1, body("x"))).status).toBe(200);
  });

  test("the count is kept: a PUT reads no directory; another replica's archive counts from the next rescan", async () => {
    const dir = join(root, "e");
    const clock = new FakeClock(Date.now());
    const store = new DirUploadStore(dir, "s", 10, clock, { ...limits, nsBytes: 1000 });
    expect((await store.write("ns", "t", h("1"), 1, body("x"))).status).toBe(200);
    expect((await store.write("ns", "t", h("2"), 2, body("xy"))).status).toBe(200);
    expect(store.quota.usage("ns")).toEqual({ archives: 2, bytes: 3 });
    // Another replica (same directory) stores one: this process has not read the directory since.
    mkdirSync(join(dir, "ns", "other"));
    writeFileSync(join(dir, "ns", "other", `${h("9")}.tar`), "abcd");
    expect(store.quota.usage("ns")).toEqual({ archives: 2, bytes: 3 });
    clock.advance(RESCAN_MS);
    expect(store.quota.usage("ns")).toEqual({ archives: 3, bytes: 7 });
    // Counted now: the third archive of the namespace fills its count, so a fourth is refused.
    const r = await store.write("ns", "t", h("3"), 1, body("x"));
    expect(r.status).toBe(429);
    expect(r.status === 429 && r.message).toContain("in 3 uploaded archives");
  });

  test("folders an eviction or a rescan leaves empty are removed, the namespace's too", async () => {
    const dir = join(root, "f");
    const store = new DirUploadStore(dir, "s", 10, realClock, { ...limits, nsArchives: 1, nsBytes: 1000 });
    expect((await store.write("ns", "first", h("1"), 1, body("x"))).status).toBe(200);
    age(join(dir, "ns", "first", `${h("1")}.tar`));
    // The namespace's one archive makes room for the next, in another template: its folder goes with it.
    expect((await store.write("ns", "second", h("2"), 1, body("y"))).status).toBe(200);
    expect(readdirSync(join(dir, "ns"))).toEqual(["second"]);
    // A folder left empty elsewhere (a crash between mkdir and the first write) goes at the namespace's next scan.
    mkdirSync(join(dir, "crashed", "t"), { recursive: true });
    expect(store.quota.usage("crashed")).toEqual({ archives: 0, bytes: 0 });
    expect(existsSync(join(dir, "crashed"))).toBe(false);
  });
});
