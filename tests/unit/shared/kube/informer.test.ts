// Informer behaviour against a scripted list/watch backend behind the client's transport seam (no socket). The same
// behaviours against the real kube-apiserver are in tests/integration/shared/kube/informer.test.ts.
import { until } from "#tests/support/wait.ts";
import { describe, expect, test } from "bun:test";
import { KubeClient } from "#shared/kube/client.ts";
import { Informer } from "#shared/kube/informer.ts";
import { ConfigMaps } from "#shared/kube/resources.ts";
import type { Transport } from "#shared/kube/transport.ts";

type CM = { metadata: { name: string; namespace: string; resourceVersion: string; labels?: Record<string, string> }; data?: Record<string, string> };
type Ev = { type: string; object: object };

/** Just enough of list and watch: a revision counter, an event log, compaction, pagination, dropping watches. */
class FakeBackend {
  rv = 100;
  objs = new Map<string, CM>();
  log: { rv: number; ev: Ev }[] = [];
  compactedTo = 0;
  /** How a too-old resume version is refused: an ERROR event in a 200 stream, or the watch request's own 410. */
  expiredAs: "event" | "http" = "event";
  failNext: number[] = []; // statuses to answer the next requests with
  requests: string[] = [];
  private watchers = new Set<{ from: number; c: ReadableStreamDefaultController<Uint8Array> }>();
  private enc = new TextEncoder();

  put(name: string, data: Record<string, string> = {}, labels?: Record<string, string>): void {
    const type = this.objs.has(name) ? "MODIFIED" : "ADDED";
    const o: CM = { metadata: { name, namespace: "n", resourceVersion: String(++this.rv), labels }, data };
    this.objs.set(name, o);
    this.emit(type, o);
  }
  del(name: string): void {
    const o = this.objs.get(name)!;
    this.objs.delete(name);
    this.emit("DELETED", { ...o, metadata: { ...o.metadata, resourceVersion: String(++this.rv) } });
  }
  bookmark(): void {
    const rv = ++this.rv;
    for (const w of this.watchers) w.c.enqueue(this.line({ type: "BOOKMARK", object: { metadata: { resourceVersion: String(rv) } } }));
  }
  compact(): void {
    this.compactedTo = this.rv;
  }
  dropWatches(): void {
    for (const w of this.watchers) w.c.close();
    this.watchers.clear();
  }
  get openWatches(): number {
    return this.watchers.size;
  }
  private emit(type: string, object: CM): void {
    const rv = Number(object.metadata.resourceVersion);
    this.log.push({ rv, ev: { type, object } });
    for (const w of this.watchers) w.c.enqueue(this.line({ type, object }));
  }
  private line(e: Ev) {
    return this.enc.encode(JSON.stringify(e) + "\n");
  }

  transport: Transport = async (url, init) => {
    const u = new URL(url);
    this.requests.push(u.pathname + u.search);
    const fail = this.failNext.shift();
    if (init.signal?.aborted) throw init.signal.reason; // as fetch does
    if (fail) return Response.json({ kind: "Status", code: fail, reason: "InternalError" }, { status: fail });
    if (u.searchParams.get("watch")) {
      const from = Number(u.searchParams.get("resourceVersion"));
      if (from < this.compactedTo) {
        if (this.expiredAs === "http") {
          return Response.json({ kind: "Status", status: "Failure", code: 410, reason: "Expired", message: "too old resource version" }, { status: 410 });
        }
        return new Response(JSON.stringify({ type: "ERROR", object: { kind: "Status", code: 410, reason: "Expired", message: "too old resource version" } }) + "\n");
      }
      let w!: { from: number; c: ReadableStreamDefaultController<Uint8Array> };
      const body = new ReadableStream<Uint8Array>({
        start: (c) => {
          w = { from, c };
          for (const { rv, ev } of this.log) if (rv > from) c.enqueue(this.line(ev));
          this.watchers.add(w);
        },
      });
      init.signal?.addEventListener("abort", () => {
        if (this.watchers.delete(w)) w.c.error(init.signal!.reason);
      });
      return new Response(body);
    }
    const limit = Number(u.searchParams.get("limit") ?? 1e9);
    const start = Number(u.searchParams.get("continue") ?? 0);
    const all = [...this.objs.values()].sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
    const page = all.slice(start, start + limit);
    const next = start + limit < all.length ? String(start + limit) : undefined;
    return Response.json({ items: page, metadata: { resourceVersion: String(this.rv), continue: next } });
  };
}

function setup(opts: { pageSize?: number } = {}) {
  const be = new FakeBackend();
  const client = new KubeClient({ server: "https://fake" }, { transport: be.transport });
  const inf = new Informer<CM>(client, ConfigMaps, {
    namespace: "n",
    pageSize: opts.pageSize,
    backoff: { initialMs: 5, maxMs: 20 },
    indexers: { byTeam: (o) => (o.metadata.labels?.team ? [o.metadata.labels.team] : []) },
  });
  const seen: string[] = [];
  inf.onAdd((o) => seen.push(`add ${o.metadata.name}`));
  inf.onUpdate((a, b) => seen.push(`update ${b.metadata.name} ${a.metadata.resourceVersion}->${b.metadata.resourceVersion}`));
  inf.onDelete((o) => seen.push(`delete ${o.metadata.name}`));
  return { be, client, inf, seen };
}

describe("Informer", () => {
  test("lists every page once, becomes synced, then delivers watch adds, updates and deletes", async () => {
    const { be, inf, seen } = setup({ pageSize: 2 });
    for (const n of ["a", "b", "c", "d", "e"]) be.put(n);
    inf.start();
    await inf.synced;
    expect(seen).toEqual(["add a", "add b", "add c", "add d", "add e"]);
    expect(be.requests.filter((r) => !r.includes("watch")).length).toBe(3); // three pages
    expect(inf.listCount()).toBe(1);
    await until(() => be.openWatches === 1, "watch");
    seen.length = 0;
    be.put("f", {}, { team: "x" });
    be.put("a", { k: "v" }, { team: "x" });
    be.del("b");
    await until(() => seen.length === 3, "three events");
    expect(seen).toEqual(["add f", "update a 101->107", "delete b"]);
    expect(inf.get("n/a")?.data).toEqual({ k: "v" });
    expect(inf.get("n/b")).toBeUndefined();
    expect(inf.byIndex("byTeam", "x").map((o) => o.metadata.name).sort()).toEqual(["a", "f"]);
    await inf.stop();
  });

  test("a dropped watch resumes from the last seen resourceVersion without relisting or repeating events", async () => {
    const { be, inf, seen } = setup();
    be.put("a");
    inf.start();
    await inf.synced;
    await until(() => be.openWatches === 1, "watch");
    be.put("b");
    await until(() => seen.length === 2, "add b");
    be.dropWatches();
    be.put("c");
    await until(() => seen.length === 3, "add c");
    expect(seen).toEqual(["add a", "add b", "add c"]);
    expect(inf.listCount()).toBe(1);
    const watches = be.requests.filter((r) => r.includes("watch=1"));
    expect(watches[1]).toContain("resourceVersion=102");
    await inf.stop();
  });

  test("a bookmark moves the resume point without an event", async () => {
    const { be, inf, seen } = setup();
    inf.start();
    await inf.synced;
    await until(() => be.openWatches === 1, "watch");
    expect(be.requests.find((r) => r.includes("watch=1"))).toContain("allowWatchBookmarks=true");
    be.bookmark();
    await until(() => inf.lastResourceVersion() === "101", "bookmark");
    expect(seen).toEqual([]);
    await inf.stop();
  });

  test("410 on reconnect relists once and emits exactly the difference against the store", async () => {
    const { be, inf, seen } = setup();
    be.put("keep");
    be.put("change");
    be.put("remove");
    inf.start();
    await inf.synced;
    await until(() => be.openWatches === 1, "watch");
    seen.length = 0;
    be.dropWatches();
    // While the informer is disconnected the history it needs is compacted away: its resume version is now too old.
    be.put("change", { x: "1" });
    be.del("remove");
    be.put("new");
    be.compact();
    await until(() => inf.listCount() === 2 && seen.length === 3, "relist");
    expect(seen.sort()).toEqual(["add new", "delete remove", "update change 102->104"]);
    expect(inf.list().map((o) => o.metadata.name).sort()).toEqual(["change", "keep", "new"]);
    await until(() => be.openWatches === 1, "watch after relist");
    be.put("after");
    await until(() => seen.includes("add after"), "events after relist");
    expect(inf.listCount()).toBe(2);
    await inf.stop();
  });

  test("an HTTP 410 on the watch request itself (not an ERROR event) relists too (issue 7 safety net)", async () => {
    const { be, inf, seen } = setup();
    be.expiredAs = "http";
    be.put("keep");
    be.put("remove");
    inf.start();
    await inf.synced;
    await until(() => be.openWatches === 1, "watch");
    seen.length = 0;
    be.dropWatches();
    be.del("remove");
    be.put("new");
    be.compact();
    await until(() => inf.listCount() === 2 && seen.length === 2, "relist after the watch request's 410");
    expect(seen.sort()).toEqual(["add new", "delete remove"]);
    await until(() => be.openWatches === 1, "watch after relist");
    be.put("after");
    await until(() => seen.includes("add after"), "events after relist");
    expect(inf.listCount()).toBe(2);
    await inf.stop();
  });

  test("list failures back off and retry until the first sync", async () => {
    const { be, inf } = setup();
    be.put("a");
    be.failNext = [500, 503, 500];
    inf.start();
    await inf.synced;
    expect(inf.listCount()).toBe(4);
    expect(inf.get("n/a")).toBeDefined();
    await inf.stop();
  });

  test("a throwing handler does not stop the others or the informer", async () => {
    const { be, inf, seen } = setup();
    inf.onAdd(() => {
      throw new Error("boom");
    });
    inf.start();
    await inf.synced;
    await until(() => be.openWatches === 1, "watch");
    be.put("x");
    await until(() => seen.includes("add x"), "add x");
    await inf.stop();
  });

  test("a handler added after sync is first told about every cached object", async () => {
    const { be, inf } = setup();
    be.put("a");
    be.put("b");
    inf.start();
    await inf.synced;
    const late: string[] = [];
    inf.onAdd((o) => late.push(o.metadata.name));
    expect(late.sort()).toEqual(["a", "b"]);
    await inf.stop();
  });

  test("stop ends the watch and issues no further requests", async () => {
    const { be, inf } = setup();
    inf.start();
    await inf.synced;
    await until(() => be.openWatches === 1, "watch");
    await inf.stop();
    const n = be.requests.length;
    expect(be.openWatches).toBe(0);
    await Bun.sleep(50);
    expect(be.requests.length).toBe(n);
  });
});
