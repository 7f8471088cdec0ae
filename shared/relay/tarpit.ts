// Late answers for failed lookups (docs/envd-relay.md "Bounds"): a request naming a sandbox nobody holds, or with a
// wrong token, costs the proxy a connection, a parse and a lookup on its one JS thread, and a closed loop of them
// (the next sent as soon as the last is answered) takes every turn of that thread it can: measured in the
// hostile-tenant rig, two such loops from one address (1,300 answers/s) made another tenant's file calls wait
// 150-700 ms. Past a budget per client address, a failed lookup's answer waits FAILED_LOOKUP_DELAY_MS, so such a
// loop gets a few answers a second; lookups that succeed are never held, whoever sends them. The proxy's early
// refusals (no sandbox named, an unparsable target, an envd-internal path, no X-Access-Token) count as failed lookups
// too: a key holder probing hosts or tokens costs the thread the same as one probing ids.
import { type Clock, realClock } from "../clock/index.ts";
import { TokenBucket } from "../kube/index.ts";

export interface TarpitOptions {
  /** Failed lookups per client address answered at once, per second (and as a burst). */
  ratePerS: number;
  burst: number;
  /** How long a failed lookup past the budget waits for its answer. */
  delayMs: number;
  /** Answers held at once in all; past it they go out at once (the wait must not cost memory without bound). */
  maxHeld: number;
}

export const DEFAULT_TARPIT: TarpitOptions = { ratePerS: 20, burst: 40, delayMs: 250, maxHeld: 1024 };
const CLIENTS_MAX = 4096;

export class FailedLookupTarpit {
  private heldNow = 0;
  private readonly buckets = new Map<string, TokenBucket>();

  private readonly o: TarpitOptions;

  constructor(
    o: TarpitOptions | undefined,
    private readonly clock: Clock = realClock,
  ) {
    this.o = o ?? DEFAULT_TARPIT;
  }

  /** Failed-lookup answers waiting now. */
  get held(): number {
    return this.heldNow;
  }

  /**
   * Count one failed lookup from `client` (undefined: one shared budget). Resolves at once within its budget, else
   * after delayMs or when `signal` aborts; true when the answer was held.
   */
  async failed(client: string | undefined, signal?: AbortSignal): Promise<boolean> {
    if (this.bucket(client).tryAcquire() || this.heldNow >= this.o.maxHeld) return false;
    this.heldNow++;
    try {
      await this.clock.sleep(this.o.delayMs, signal);
    } finally {
      this.heldNow--;
    }
    return true;
  }

  private bucket(client: string | undefined): TokenBucket {
    const key = client ?? "";
    let b = this.buckets.get(key);
    if (!b) {
      // Bounded like the probe budgets (owners.ts): when full, every address starts over with a full burst.
      if (this.buckets.size >= CLIENTS_MAX) this.buckets.clear();
      b = new TokenBucket(this.o.ratePerS, this.o.burst, this.clock);
      this.buckets.set(key, b);
    }
    return b;
  }
}
