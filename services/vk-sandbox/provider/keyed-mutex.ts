// One pod key, one verb at a time. The pod controller already runs a key on one worker, but UpdatePod can
// turn into CreatePod and a dangling-pod DeletePod can race a sync; serialising per key keeps a key from
// claiming twice. Loops do not take it: they are ID-guarded instead.
export class KeyedMutex {
  private tails = new Map<string, Promise<void>>();

  async run<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.tails.get(key) ?? Promise.resolve();
    let release!: () => void;
    const mine = new Promise<void>((r) => (release = r));
    const tail = prev.then(() => mine);
    this.tails.set(key, tail);
    await prev;
    try {
      return await fn();
    } finally {
      release();
      if (this.tails.get(key) === tail) this.tails.delete(key);
    }
  }
}
