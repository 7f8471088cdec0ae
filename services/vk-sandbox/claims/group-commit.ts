// Group commit for the claims table. Each write snapshots the whole table, so concurrent creates can share
// one write: while a write is in flight, every new request joins the *next* batch, which starts as soon as
// the current one lands. The rule that makes this safe: a request resolves only after a write that started
// after the request was made has landed. A caller adds its row, then calls commit(); the snapshot of the
// batch it joins is taken later, so it contains that row. A request that arrives while a write is running
// never rides that write, because its snapshot may predate the row.
//
// Batches run one at a time, which also makes snapshot -> write -> rename one critical section: the newest
// table always lands last, never an older snapshot that happened to finish later.

interface Batch<T> {
  tags: Set<T>;
  promise: Promise<void>;
  resolve: () => void;
  reject: (e: unknown) => void;
}

export type BatchWriter<T> = (included: ReadonlySet<T>) => Promise<void>;

export class GroupCommit<T = string> {
  private pending: Batch<T> | undefined;
  private running = false;
  private current: Batch<T> | undefined;
  private batches = 0;

  /**
   * `write` runs once per batch with the tags of every request in it; it must snapshot, encode and persist.
   * Its rejection rejects every request of that batch.
   */
  constructor(private readonly write: BatchWriter<T>) {}

  /** Number of writes started so far (benchmark and test figure). */
  get writes(): number {
    return this.batches;
  }

  /** Resolves when a write that started after this call has landed; rejects with that write's error. */
  commit(tag?: T): Promise<void> {
    let b = this.pending;
    if (!b) {
      let resolve!: () => void;
      let reject!: (e: unknown) => void;
      const promise = new Promise<void>((res, rej) => {
        resolve = res;
        reject = rej;
      });
      b = { tags: new Set(), promise, resolve, reject };
      this.pending = b;
    }
    if (tag !== undefined) b.tags.add(tag);
    if (!this.running) void this.drain();
    return b.promise;
  }

  /** Resolves once nothing is pending or in flight. */
  async idle(): Promise<void> {
    for (;;) {
      const b = this.pending ?? this.current;
      if (!b) return;
      await b.promise.catch(() => undefined);
    }
  }

  private async drain(): Promise<void> {
    this.running = true;
    // One microtask lets a synchronous burst of commits share the first write too.
    await Promise.resolve();
    try {
      while (this.pending) {
        const b = this.pending;
        this.pending = undefined;
        this.current = b;
        this.batches++;
        try {
          await this.write(b.tags);
          b.resolve();
        } catch (e) {
          b.reject(e);
        } finally {
          this.current = undefined;
        }
      }
    } finally {
      this.running = false;
    }
  }
}
