// When a name no inventory holds may be asked of every node live (docs/api.md "Resolution", step 4). That fan-out is
// what lets a sandbox claimed a moment ago by another replica be read before its node publishes (scenario 17), but
// left open it turned every Get of a missing name into one root-token call per node. So it is bounded:
//   - names that cannot exist (not a DNS-1123 subdomain, namespace not a DNS-1123 label) never go live;
//   - concurrent Gets of one name share one fan-out, and a name a fan-out just missed is answered from the inventory
//     view for MISS_TTL_MS;
//   - fan-outs are spent from a per-replica token bucket (LIVE_FANOUT_QPS, burst LIVE_FANOUT_BURST); once it is
//     empty a missing name is decided from the inventory view alone (404) until tokens return.
import { type Clock, realClock } from "#shared/clock/index.ts";
import { TokenBucket } from "#shared/kube/index.ts";

export const LIVE_FANOUT_QPS = 5;
export const LIVE_FANOUT_BURST = 10;
export const MISS_TTL_MS = 1000;
const MAX_MISSES = 4096;

const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

export class LiveLookupGate {
  private readonly bucket: TokenBucket;
  private readonly misses = new Map<string, number>();
  private readonly inflight = new Map<string, Promise<unknown>>();

  constructor(
    private readonly clock: Pick<Clock, "monotonic" | "after"> = realClock,
    qps = LIVE_FANOUT_QPS,
    burst = LIVE_FANOUT_BURST,
  ) {
    this.bucket = new TokenBucket(qps, burst, clock);
  }

  /** Runs `fanOut` for `<ns>/<name>` if the bounds allow it; undefined (not found) when they do not. */
  async run<R>(namespace: string, name: string, fanOut: () => Promise<R | undefined>): Promise<R | undefined> {
    if (!DNS1123_LABEL.test(namespace) || name.length > 253 || !DNS1123_SUBDOMAIN.test(name)) return undefined;
    const key = `${namespace}/${name}`;
    const running = this.inflight.get(key);
    if (running) return running as Promise<R | undefined>;
    const missedAt = this.misses.get(key);
    if (missedAt !== undefined && this.clock.monotonic() - missedAt < MISS_TTL_MS) return undefined;
    if (!this.bucket.tryAcquire()) return undefined;
    const p = fanOut()
      .then((hit) => {
        if (hit === undefined) this.missed(key);
        else this.misses.delete(key);
        return hit;
      })
      .finally(() => this.inflight.delete(key));
    this.inflight.set(key, p);
    return p;
  }

  private missed(key: string): void {
    this.misses.delete(key);
    this.misses.set(key, this.clock.monotonic());
    if (this.misses.size > MAX_MISSES) this.misses.delete(this.misses.keys().next().value as string);
  }
}
