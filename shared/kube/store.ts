// The informer's in-memory cache: objects by "ns/name" (or "name" when cluster-scoped), plus named indexes kept in
// step with every write, so `byIndex` never scans.

import { type Obj, objectKey } from "./keys.ts";

export type { Obj };
export type Indexers<T> = Record<string, (obj: T) => string[]>;

export class Store<T extends Obj> {
  private readonly items = new Map<string, T>();
  private readonly indexes = new Map<string, Map<string, Set<string>>>();

  constructor(private readonly indexers: Indexers<T> = {}) {
    for (const name of Object.keys(indexers)) this.indexes.set(name, new Map());
  }

  get(key: string): T | undefined {
    return this.items.get(key);
  }

  keys(): IterableIterator<string> {
    return this.items.keys();
  }

  list(): T[] {
    return [...this.items.values()];
  }

  get size(): number {
    return this.items.size;
  }

  /** Stores the object and returns the one it replaced, if any. */
  set(obj: T): T | undefined {
    const key = objectKey(obj);
    const old = this.items.get(key);
    if (old) this.unindex(key, old);
    this.items.set(key, obj);
    this.index(key, obj);
    return old;
  }

  delete(key: string): T | undefined {
    const old = this.items.get(key);
    if (!old) return undefined;
    this.unindex(key, old);
    this.items.delete(key);
    return old;
  }

  byIndex(indexName: string, value: string): T[] {
    const idx = this.indexes.get(indexName);
    if (!idx) throw new Error(`no indexer named "${indexName}"`);
    const keys = idx.get(value);
    if (!keys) return [];
    return [...keys].map((k) => this.items.get(k)!);
  }

  private index(key: string, obj: T): void {
    for (const [name, fn] of Object.entries(this.indexers)) {
      const idx = this.indexes.get(name)!;
      for (const v of new Set(fn(obj))) {
        let s = idx.get(v);
        if (!s) idx.set(v, (s = new Set()));
        s.add(key);
      }
    }
  }

  private unindex(key: string, obj: T): void {
    for (const [name, fn] of Object.entries(this.indexers)) {
      const idx = this.indexes.get(name)!;
      for (const v of new Set(fn(obj))) {
        const s = idx.get(v);
        if (!s) continue;
        s.delete(key);
        if (s.size === 0) idx.delete(v);
      }
    }
  }
}
