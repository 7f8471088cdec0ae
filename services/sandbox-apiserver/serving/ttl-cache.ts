// A small expiring cache for TokenReview and SubjectAccessReview answers (10 s by default, as the upstream webhook
// authenticator and authorizer cache them). Concurrent misses for one key share one lookup. Bounded: past
// `maxEntries` the oldest entries go first.
import { type Clock, realClock } from "#shared/clock/index.ts";

export class TtlCache<V> {
  private readonly entries = new Map<string, { value: V; expires: number }>();
  private readonly inflight = new Map<string, Promise<V>>();

  constructor(
    private readonly clock: Clock = realClock,
    private readonly maxEntries = 4096,
  ) {}

  async get(key: string, ttlFor: (v: V) => number, load: () => Promise<V>): Promise<V> {
    const hit = this.entries.get(key);
    if (hit && hit.expires > this.clock.now()) return hit.value;
    const running = this.inflight.get(key);
    if (running) return running;
    const p = load()
      .then((value) => {
        const ttl = ttlFor(value);
        if (ttl > 0) {
          this.entries.delete(key);
          this.entries.set(key, { value, expires: this.clock.now() + ttl });
          if (this.entries.size > this.maxEntries) this.entries.delete(this.entries.keys().next().value as string);
        }
        return value;
      })
      .finally(() => this.inflight.delete(key));
    this.inflight.set(key, p);
    return p;
  }
}
