// An informer: LIST (paginated) once, then WATCH from the list's resourceVersion with bookmarks, keeping an indexed
// in-memory store and calling handlers with what changed. A watch that ends (the server's timeoutSeconds, a dropped
// connection) resumes from the last resourceVersion seen; only 410 Gone (the version was compacted away) makes it
// LIST again, and that relist is diffed against the store so handlers see the adds, updates and deletes they
// missed. There is no periodic relist: APF prices a LIST by the resource's object count (shared/kube/README.md "Informer").
import type { Logger } from "pino";
import type { KubeClient } from "./client.ts";
import { isGone, KubeApiError, type Status } from "./errors.ts";
import type { ResourceRef } from "./resources.ts";
import { objectKey, type Obj } from "./keys.ts";
import { Store, type Indexers } from "./store.ts";
import { realClock } from "../clock/index.ts";


export interface InformerOptions<T> {
  namespace?: string;
  fieldSelector?: string;
  labelSelector?: string;
  indexers?: Indexers<T>;
  log?: Logger;
  /** LIST page size; 500 as client-go's pager. */
  pageSize?: number;
  /** Server-side watch timeout per watch call. Default: random in [300, 600) s, as client-go spreads reconnects. */
  watchTimeoutSeconds?: () => number;
  /** Backoff after an error: doubles from `initialMs` to `maxMs`, with up to 20% jitter. */
  backoff?: { initialMs: number; maxMs: number };
}

type Handlers<T> = { add: ((o: T) => void)[]; update: ((a: T, b: T) => void)[]; delete: ((o: T) => void)[] };

export class Informer<T extends Obj> {
  private readonly store: Store<T>;
  private readonly handlers: Handlers<T> = { add: [], update: [], delete: [] };
  private readonly o: InformerOptions<T>;
  private abort: AbortController | undefined;
  private loop: Promise<void> | undefined;
  private lastRV = "";
  private lists = 0;
  private isSynced = false;
  private resolveSynced!: () => void;
  /** Resolves once the first LIST is in the store and its adds were delivered. Stays pending if stopped before. */
  readonly synced: Promise<void>;

  /** No side effects: nothing is requested until start(). */
  constructor(
    private readonly client: KubeClient,
    private readonly res: ResourceRef,
    o: InformerOptions<T> = {},
  ) {
    this.o = o;
    this.store = new Store<T>(o.indexers);
    this.synced = new Promise((r) => (this.resolveSynced = r));
  }

  /** A handler added after the store has content is first called with every object in it, as client-go does. */
  onAdd(fn: (obj: T) => void): void {
    this.handlers.add.push(fn);
    for (const obj of this.store.list()) this.call("add", () => fn(obj));
  }
  onUpdate(fn: (oldObj: T, newObj: T) => void): void {
    this.handlers.update.push(fn);
  }
  onDelete(fn: (obj: T) => void): void {
    this.handlers.delete.push(fn);
  }

  start(): void {
    if (this.abort) return;
    this.abort = new AbortController();
    this.loop = this.run(this.abort.signal);
  }

  async stop(): Promise<void> {
    this.abort?.abort(new Error("informer stopped"));
    await this.loop;
  }

  get(key: string): T | undefined {
    return this.store.get(key);
  }
  list(): T[] {
    return this.store.list();
  }
  byIndex(indexName: string, value: string): T[] {
    return this.store.byIndex(indexName, value);
  }
  /** How many LISTs this informer has made (pages of one list count once). */
  listCount(): number {
    return this.lists;
  }
  hasSynced(): boolean {
    return this.isSynced;
  }
  /** The resourceVersion the next watch resumes from. */
  lastResourceVersion(): string {
    return this.lastRV;
  }

  private async run(signal: AbortSignal): Promise<void> {
    const { initialMs, maxMs } = this.o.backoff ?? { initialMs: 800, maxMs: 30_000 };
    let delay = initialMs;
    let needList = true;
    let goneInARow = 0;
    const pause = async () => {
      await realClock.sleep(jitter(delay), signal);
      delay = Math.min(delay * 2, maxMs);
    };
    while (!signal.aborted) {
      try {
        if (needList) {
          await this.relist(signal);
          needList = false;
        }
        const started = performance.now();
        const { gone, events } = await this.watchOnce(signal);
        if (gone) {
          needList = true;
          // One immediate relist; a second Gone in a row backs off, so a flapping server is not hammered.
          if (++goneInARow > 1) await pause();
          continue;
        }
        goneInARow = 0;
        if (events > 0) delay = initialMs;
        // A watch the server closes at once with nothing in it would otherwise spin.
        else if (performance.now() - started < 1000) await pause();
      } catch (e) {
        if (signal.aborted) break;
        if (isGone(e)) {
          needList = true;
          if (++goneInARow <= 1) continue;
        }
        this.o.log?.warn({ resource: this.res.resource, err: (e as Error).message, retryInMs: Math.round(delay) }, "informer error; backing off");
        await pause();
      }
    }
  }

  private async relist(signal: AbortSignal): Promise<void> {
    this.lists++;
    const items: T[] = [];
    let cont: string | undefined;
    let rv = "";
    do {
      if (signal.aborted) return;
      const page = await this.client.list<T>(this.res, {
        namespace: this.o.namespace,
        fieldSelector: this.o.fieldSelector,
        labelSelector: this.o.labelSelector,
        limit: this.o.pageSize ?? 500,
        continue: cont,
      });
      items.push(...page.items);
      rv = page.metadata.resourceVersion;
      cont = page.metadata.continue || undefined;
    } while (cont);
    if (signal.aborted) return;
    this.replace(items);
    this.lastRV = rv;
    if (!this.isSynced) {
      this.isSynced = true;
      this.resolveSynced();
    }
  }

  /** Makes the store equal to `items`, telling handlers only what differs. */
  private replace(items: T[]): void {
    const seen = new Set<string>();
    for (const obj of items) {
      const key = objectKey(obj);
      seen.add(key);
      const old = this.store.set(obj);
      if (!old) this.emitAdd(obj);
      else if (old.metadata?.resourceVersion !== obj.metadata?.resourceVersion) this.emitUpdate(old, obj);
    }
    for (const key of [...this.store.keys()]) {
      if (seen.has(key)) continue;
      const old = this.store.delete(key)!;
      this.emitDelete(old);
    }
  }

  private async watchOnce(signal: AbortSignal): Promise<{ gone: boolean; events: number }> {
    let events = 0;
    const timeoutSeconds = this.o.watchTimeoutSeconds?.() ?? Math.floor(300 * (1 + Math.random()));
    const stream = this.client.watch<T>(this.res, {
      namespace: this.o.namespace,
      resourceVersion: this.lastRV,
      fieldSelector: this.o.fieldSelector,
      labelSelector: this.o.labelSelector,
      allowWatchBookmarks: true,
      timeoutSeconds,
      signal,
    });
    for await (const ev of stream) {
      events++;
      const obj = ev.object;
      switch (ev.type) {
        case "ADDED":
        case "MODIFIED": {
          const old = this.store.set(obj);
          this.advance(obj);
          if (old) this.emitUpdate(old, obj);
          else this.emitAdd(obj);
          break;
        }
        case "DELETED": {
          // The event carries the object's final state; deliver that, not the older cached copy.
          this.store.delete(objectKey(obj));
          this.advance(obj);
          this.emitDelete(obj);
          break;
        }
        case "BOOKMARK":
          this.advance(obj);
          break;
        case "ERROR": {
          const s = obj as unknown as Status;
          if (s.code === 410 || s.reason === "Expired" || s.reason === "Gone") {
            this.o.log?.info({ resource: this.res.resource, rv: this.lastRV, msg: s.message }, "watch expired; relisting");
            return { gone: true, events };
          }
          throw KubeApiError.fromResponse(s.code ?? 500, "watch", this.res.resource, s);
        }
      }
    }
    return { gone: false, events };
  }

  private advance(obj: Obj): void {
    const rv = obj.metadata?.resourceVersion;
    if (rv) this.lastRV = rv;
  }

  private emitAdd(obj: T): void {
    for (const fn of this.handlers.add) this.call("add", () => fn(obj));
  }
  private emitUpdate(a: T, b: T): void {
    for (const fn of this.handlers.update) this.call("update", () => fn(a, b));
  }
  private emitDelete(obj: T): void {
    for (const fn of this.handlers.delete) this.call("delete", () => fn(obj));
  }

  // A throwing handler must not stop the informer or starve the other handlers.
  private call(kind: string, fn: () => void): void {
    try {
      fn();
    } catch (e) {
      this.o.log?.error({ resource: this.res.resource, handler: kind, err: (e as Error).message }, "informer handler threw");
    }
  }
}

function jitter(ms: number): number {
  return ms * (1 + Math.random() * 0.2);
}

