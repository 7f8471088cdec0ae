// The informer against a real kube-apiserver: adds, updates, deletes, selectors, no periodic LIST, and recovery
// from 410 Gone.
//
// How the 410 is forced, reliably: this apiserver runs with the watch cache off for configmaps
// (--watch-cache-sizes=configmaps#0), so configmap watches are served by etcd directly, and with
// --etcd-compaction-interval=1s, so etcd history older than a second or two is compacted away. (With the watch
// cache on, a resume version stays servable for at least 75 s and no 410 comes in test time.) The informer's
// client is wrapped so the test can cut its watch and hold the reconnect; while it is held, objects change and the
// test waits -- on a condition, not a sleep -- until a raw watch from the informer's resume version is answered with
// an ERROR 410 event. Then the reconnect is released: the real apiserver answers 410, and the informer must relist
// and report exactly what it missed.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { until as waitUntil } from "#tests/support/wait.ts";
import { KubeClient, type WatchEvent } from "#shared/kube/client.ts";
import { loadKubeConnection } from "#shared/kube/connection.ts";
import { Informer } from "#shared/kube/informer.ts";
import { ConfigMaps, Secrets, type ResourceRef } from "#shared/kube/resources.ts";
import { startKubeApiserver, type TestCluster } from "#tests/kube/harness.ts";

type CM = { metadata: { name: string; namespace: string; resourceVersion: string; labels?: Record<string, string> }; data?: Record<string, string> };

/** The real client, plus a switch to cut the informer's current watch and hold its next one. */
class CuttableClient extends KubeClient {
  private cut = new AbortController();
  private gate: Promise<void> = Promise.resolve();
  private open = () => {};
  watchFrom: string[] = [];

  override async *watch<T>(res: ResourceRef, o: Parameters<KubeClient["watch"]>[1]): AsyncGenerator<WatchEvent<T>> {
    await this.gate;
    this.watchFrom.push(o.resourceVersion);
    this.cut = new AbortController();
    yield* super.watch<T>(res, { ...o, signal: AbortSignal.any([o.signal, this.cut.signal]) });
  }
  cutAndHold(): void {
    this.gate = new Promise((r) => (this.open = r));
    this.cut.abort();
  }
  release(): void {
    this.open();
  }
}

let cluster: TestCluster;
let admin: KubeClient;

beforeAll(async () => {
  cluster = await startKubeApiserver({ extraArgs: ["--watch-cache-sizes=configmaps#0", "--etcd-compaction-interval=1s"] });
  admin = new KubeClient(await loadKubeConnection({ KUBECONFIG: cluster.kubeconfig() }, { serviceAccountDir: "/nonexistent" }));
  await cluster.createNamespace("inf");
  await cluster.createNamespace("other");
}, 120_000);
afterAll(async () => {
  await cluster?.stop();
});

/** A real apiserver: events can take a while on two shared cores. */
const until = (cond: () => boolean | Promise<boolean>, what: string, ms = 20_000) => waitUntil(cond, what, ms, 20);

const cm = (name: string, ns = "inf", data: Record<string, string> = {}, labels?: Record<string, string>) => ({
  apiVersion: "v1",
  kind: "ConfigMap",
  metadata: { name, namespace: ns, labels },
  data,
});

function record(inf: Informer<CM>): string[] {
  const seen: string[] = [];
  inf.onAdd((o) => seen.push(`add ${o.metadata.name}`));
  inf.onUpdate((_, b) => seen.push(`update ${b.metadata.name}`));
  inf.onDelete((o) => seen.push(`delete ${o.metadata.name}`));
  return seen;
}

describe("Informer on a real apiserver", () => {
  test("sees existing objects, then adds, updates and deletes; indexes follow; selectors filter", async () => {
    await admin.create(ConfigMaps, cm("pre", "inf", {}, { app: "x" }));
    await admin.create(ConfigMaps, cm("unlabelled", "inf"));
    const inf = new Informer<CM>(admin, ConfigMaps, {
      namespace: "inf",
      labelSelector: "app",
      indexers: { byApp: (o) => (o.metadata.labels?.app ? [o.metadata.labels.app] : []) },
    });
    const seen = record(inf);
    inf.start();
    await inf.synced;
    expect(seen).toEqual(["add pre"]);
    await admin.create(ConfigMaps, cm("a", "inf", {}, { app: "y" }));
    await admin.create(ConfigMaps, cm("ignored", "other", {}, { app: "y" })); // other namespace
    await admin.create(ConfigMaps, cm("ignored2", "inf")); // no label
    await admin.patch(ConfigMaps, "a", { data: { k: "v" } }, { namespace: "inf", type: "merge" });
    await admin.delete(ConfigMaps, "pre", { namespace: "inf" });
    await until(() => seen.length === 4, "four events");
    expect(seen).toEqual(["add pre", "add a", "update a", "delete pre"]);
    expect(inf.get("inf/a")?.data).toEqual({ k: "v" });
    expect(inf.list().map((o) => o.metadata.name)).toEqual(["a"]);
    expect(inf.byIndex("byApp", "y").map((o) => o.metadata.name)).toEqual(["a"]);
    expect(inf.listCount()).toBe(1);
    await inf.stop();
  });

  test("a field selector narrows the informer to one object", async () => {
    await admin.create(ConfigMaps, cm("fs-1"));
    await admin.create(ConfigMaps, cm("fs-2"));
    const inf = new Informer<CM>(admin, ConfigMaps, { namespace: "inf", fieldSelector: "metadata.name=fs-2" });
    inf.start();
    await inf.synced;
    expect(inf.list().map((o) => o.metadata.name)).toEqual(["fs-2"]);
    await inf.stop();
  });

  // Secrets keep the watch cache in this apiserver: a resume version stays servable and bookmarks flow. (Configmaps
  // here have neither, so an idle configmap informer would legitimately relist once etcd compacts past its version.)
  test("an idle informer makes no requests at all between its long watches, and no periodic LIST", async () => {
    const client = new KubeClient(admin.conn);
    const inf = new Informer<CM>(client, Secrets, { namespace: "inf" });
    inf.start();
    await inf.synced;
    await until(() => client.requestCount() === 2, "list + watch");
    await Bun.sleep(3_000);
    console.log(`idle informer (default 300-600 s watches): ${client.requestCount() - 2} requests in 3 s after list+watch`);
    expect(client.requestCount()).toBe(2);
    expect(inf.listCount()).toBe(1);
    await inf.stop();
  });

  test("watches the server ends are resumed without a LIST", async () => {
    const client = new KubeClient(admin.conn);
    // 1 s server-side watch timeouts, so several watches end within the test.
    const inf = new Informer<CM>(client, Secrets, { namespace: "inf", watchTimeoutSeconds: () => 1 });
    const seen = record(inf);
    inf.start();
    await inf.synced;
    const r0 = client.requestCount();
    await Bun.sleep(3_500);
    await admin.create(Secrets, { apiVersion: "v1", kind: "Secret", metadata: { name: "s1", namespace: "inf" } });
    await until(() => seen.includes("add s1"), "add s1 after several resumed watches");
    const requests = client.requestCount() - r0;
    console.log(`informer with 1 s watch timeouts: ${requests} watch requests in ~3.5 s, ${inf.listCount()} LIST`);
    expect(requests).toBeGreaterThanOrEqual(3);
    expect(requests).toBeLessThanOrEqual(6);
    expect(inf.listCount()).toBe(1);
    await inf.stop();
  });

  test("a large namespace is listed in pages of 500 as one LIST, and a burst of writes arrives through the watch", async () => {
    await cluster.createNamespace("many");
    const secret = (name: string) => ({ apiVersion: "v1", kind: "Secret", metadata: { name, namespace: "many" }, stringData: { k: name } });
    await pool(1200, 8, (i) => admin.create(Secrets, secret(`s-${i}`)));
    const client = new KubeClient(admin.conn);
    const inf = new Informer<CM>(client, Secrets, { namespace: "many" });
    let adds = 0;
    inf.onAdd(() => adds++);
    const t0 = performance.now();
    inf.start();
    await inf.synced;
    const syncMs = performance.now() - t0;
    expect(adds).toBe(1200);
    expect(inf.listCount()).toBe(1);
    await until(() => client.requestCount() === 4, "three pages and a watch");
    const t1 = performance.now();
    await pool(300, 8, (i) => admin.create(Secrets, secret(`t-${i}`)));
    const writtenMs = performance.now() - t1;
    await until(() => adds === 1500, "300 adds through the watch");
    const seenMs = performance.now() - t1;
    console.log(
      `informer: synced 1200 secrets in ${syncMs.toFixed(0)} ms (3 pages); 300 creates at concurrency 8 took ${writtenMs.toFixed(0)} ms, ` +
        `all 300 seen by the informer ${(seenMs - writtenMs).toFixed(0)} ms after the last create returned`,
    );
    expect(client.requestCount()).toBe(4);
    await inf.stop();
  }, 60_000);

  test("after a 410 Gone the informer relists and reports exactly what it missed", async () => {
    await admin.create(ConfigMaps, cm("keep"));
    await admin.create(ConfigMaps, cm("change"));
    await admin.create(ConfigMaps, cm("remove"));
    const client = new CuttableClient(admin.conn);
    const inf = new Informer<CM>(client, ConfigMaps, { namespace: "inf", labelSelector: "!app", fieldSelector: "metadata.name!=ignored2" });
    const seen = record(inf);
    inf.start();
    await inf.synced;
    await until(() => client.watchFrom.length === 1, "first watch");
    expect(inf.listCount()).toBe(1);
    // What other tests in this namespace created is in the cache too; the relist must keep exactly that, whatever
    // ran before (--randomize), minus what was deleted and plus what was created while the watch was held.
    const before = inf.list().map((o) => o.metadata.name);
    expect(before).toEqual(expect.arrayContaining(["keep", "change", "remove"]));
    seen.length = 0;

    client.cutAndHold();
    const resumeFrom = inf.lastResourceVersion();
    await admin.patch(ConfigMaps, "change", { data: { x: "1" } }, { namespace: "inf", type: "merge" });
    await admin.delete(ConfigMaps, "remove", { namespace: "inf" });
    await admin.create(ConfigMaps, cm("new"));
    // Keep etcd's revision moving (in another namespace) until compaction has passed the resume version.
    let n = 0;
    await until(async () => {
      await admin.create(ConfigMaps, cm(`tick-${n++}`, "other"));
      return await watchIsGone(resumeFrom);
    }, "etcd compaction past the informer's resume version", 30_000);

    client.release();
    await until(() => inf.listCount() === 2 && seen.length >= 3, "relist after 410");
    expect(seen.sort()).toEqual(["add new", "delete remove", "update change"]);
    expect(client.watchFrom[1]).toBe(resumeFrom); // it did try to resume, and was told 410
    expect(inf.list().map((o) => o.metadata.name).sort()).toEqual([...before.filter((n) => n !== "remove"), "new"].sort());
    expect(inf.get("inf/change")?.data).toEqual({ x: "1" });

    // And it watches again from the relist: later changes arrive without another LIST.
    await until(() => client.watchFrom.length >= 3, "watch after relist");
    await admin.create(ConfigMaps, cm("after"));
    await until(() => seen.includes("add after"), "event after relist");
    expect(inf.listCount()).toBe(2);
    await inf.stop();
  });
});

/** Runs fn(0..n-1) with at most `width` in flight. */
async function pool(n: number, width: number, fn: (i: number) => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < n) await fn(next++);
    }),
  );
}

/** Whether a watch from `rv` is answered with 410 (ERROR event or HTTP status), i.e. compacted away. */
async function watchIsGone(rv: string): Promise<boolean> {
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), 500);
  try {
    for await (const ev of admin.watch<{ code?: number }>(ConfigMaps, { namespace: "inf", resourceVersion: rv, signal: ac.signal, timeoutSeconds: 1 })) {
      if (ev.type === "ERROR") return ev.object.code === 410;
    }
    return false;
  } catch (e) {
    return (e as { status?: number }).status === 410;
  } finally {
    clearTimeout(timer);
    ac.abort();
  }
}
