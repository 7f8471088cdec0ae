// The relay's bounds (docs/envd-relay.md "Bounds"): how many relays may be open at once (globally, per sandbox and
// per client address) and how many bytes the proxy may hold for slow readers across every relay. A relay is one
// relayed HTTP request or one relayed WebSocket, counted from the tunnel dial until its tunnel closes.
import { type Clock, realClock } from "../clock/index.ts";
import { TokenBucket } from "../kube/index.ts";

export interface RelayLimitOptions {
  /** Relays open at once in this process; one more answers 503. */
  maxRelays: number;
  /** Relays open at once to one sandbox; one more answers 429. */
  maxRelaysPerSandbox: number;
  /** Relays open at once from one client address; one more answers 429. 0 = no per-client cap. */
  maxRelaysPerClient: number;
  /**
   * Relays open at once to the sandboxes of one namespace (one tenant); one more answers 429. Below maxRelays, so
   * one tenant's open WebSockets or slow streams cannot take every slot from the others. 0 = no per-namespace cap.
   */
  maxRelaysPerNamespace: number;
  /**
   * Credential-less relays (a public sandbox's user port, no token) open at once in this process; one more answers
   * 503. They count toward maxRelays too, but never toward a namespace's cap or a sandbox's token-holder bucket: anyone
   * may send them, so they get buckets of their own. Taken as at most maxRelays - 1, so they never fill the process.
   */
  maxPublicRelays: number;
  /** Credential-less relays open at once to one sandbox; one more answers 429. */
  maxPublicRelaysPerSandbox: number;
  /** Credential-less relays open at once from one client address; one more answers 429. */
  maxPublicRelaysPerClient: number;
  /** Bytes held for slow readers across every relay; past it, streams pause at the guest. */
  bufferBytes: number;
  /** How long a guest may take to answer a request head or a WebSocket upgrade (ms). */
  guestHandshakeMs: number;
  /**
   * How long a relay to a sandbox the fleet view shows asleep may wait for its node to wake it (ms): the dial and
   * the node's 101 together. Past it the client gets 504 and the relay's slot is freed; the node's wake goes on, so
   * a later request is served.
   */
  wakeTimeoutMs: number;
  /**
   * A request body still arriving must bring at least this many bytes per second, counted over each window of
   * requestBodyRateWindowMs (a body dripped a byte at a time would otherwise hold its slot forever); else 408 and the
   * tunnel closes. 0 = no minimum.
   */
  requestBodyMinRate: number;
  /** The window the body rate is counted over (ms). */
  requestBodyRateWindowMs: number;
  /**
   * Chunks of guest response bodies the relay decodes per second for one namespace, across its streams (ChunkPacer);
   * past it (and its one-second burst) the tenant's streams pause at the guest until the budget refills. Set far
   * above what envd sends (its chunks are writes of KiBs), it only meets a guest that frames its body in 1-byte
   * chunks to spend the proxy's thread.
   */
  chunkRatePerNamespace: number;
}

/** Safe for the chart's 512 Mi limit (docs/envd-relay.md "Bounds" has the arithmetic). */
export const DEFAULT_RELAY_LIMITS: RelayLimitOptions = {
  maxRelays: 128,
  maxRelaysPerSandbox: 64,
  maxRelaysPerClient: 0,
  maxRelaysPerNamespace: 32,
  maxPublicRelays: 64,
  maxPublicRelaysPerSandbox: 16,
  maxPublicRelaysPerClient: 8,
  bufferBytes: 32 * 1024 * 1024,
  guestHandshakeMs: 30_000,
  wakeTimeoutMs: 30_000,
  requestBodyMinRate: 1024,
  requestBodyRateWindowMs: 10_000,
  chunkRatePerNamespace: 100_000,
};

/** Why a relay was refused a slot: its HTTP status follows (429 for a sandbox, client or tenant, 503 for the process). */
export type SlotRefusal = {
  status: 429 | 503;
  cap: "sandbox" | "client" | "namespace" | "global" | "public_sandbox" | "public_client" | "public_global";
  message: string;
};

type SlotCaps = Pick<RelayLimitOptions, "maxRelays" | "maxRelaysPerSandbox" | "maxRelaysPerClient" | "maxRelaysPerNamespace"> &
  Partial<Pick<RelayLimitOptions, "maxPublicRelays" | "maxPublicRelaysPerSandbox" | "maxPublicRelaysPerClient">>;

/**
 * Counts open relays; `acquire` either takes a slot (and returns its release) or says which cap is reached. A relay
 * that carries a credential (an envd access token, a traffic token, a signed URL) counts per sandbox, per client
 * and per namespace; one that carries none (a public user port) counts only in the public buckets (per sandbox, per
 * client, and all of them), so whoever can reach a public port cannot spend the owner's slots. Both count globally.
 */
export class RelaySlots {
  private total = 0;
  private readonly bySandbox = new Map<string, number>();
  private readonly byClient = new Map<string, number>();
  private readonly byNamespace = new Map<string, number>();
  private publicTotal = 0;
  private readonly publicBySandbox = new Map<string, number>();
  private readonly publicByClient = new Map<string, number>();
  private readonly maxPublic: number;
  private readonly maxPublicPerSandbox: number;
  private readonly maxPublicPerClient: number;

  constructor(private readonly o: SlotCaps) {
    const d = DEFAULT_RELAY_LIMITS;
    // Public relays alone never take the last slot: a token holder can always be served.
    this.maxPublic = Math.min(o.maxPublicRelays ?? d.maxPublicRelays, o.maxRelays - 1);
    this.maxPublicPerSandbox = o.maxPublicRelaysPerSandbox ?? d.maxPublicRelaysPerSandbox;
    this.maxPublicPerClient = o.maxPublicRelaysPerClient ?? d.maxPublicRelaysPerClient;
  }

  get active(): number {
    return this.total;
  }

  /** Credential-less relays open now. */
  get activePublic(): number {
    return this.publicTotal;
  }

  acquire(sandbox: string, client: string | undefined, namespace = "", publicRelay = false): { release: () => void } | SlotRefusal {
    if (this.total >= this.o.maxRelays) return { status: 503, cap: "global", message: "the proxy is at its relay capacity; retry later" };
    if (publicRelay) return this.acquirePublic(sandbox, client);
    const s = this.bySandbox.get(sandbox) ?? 0;
    if (s >= this.o.maxRelaysPerSandbox) return { status: 429, cap: "sandbox", message: `too many concurrent requests to this sandbox (limit ${this.o.maxRelaysPerSandbox})` };
    const perClient = this.o.maxRelaysPerClient > 0 && client !== undefined;
    const c = perClient ? (this.byClient.get(client) ?? 0) : 0;
    if (perClient && c >= this.o.maxRelaysPerClient) return { status: 429, cap: "client", message: `too many concurrent requests from this client (limit ${this.o.maxRelaysPerClient})` };
    const perNamespace = this.o.maxRelaysPerNamespace > 0 && namespace !== "";
    const n = perNamespace ? (this.byNamespace.get(namespace) ?? 0) : 0;
    if (perNamespace && n >= this.o.maxRelaysPerNamespace) {
      return { status: 429, cap: "namespace", message: `too many concurrent requests to this tenant's sandboxes (limit ${this.o.maxRelaysPerNamespace})` };
    }
    this.total++;
    if (perNamespace) this.byNamespace.set(namespace, n + 1);
    this.bySandbox.set(sandbox, s + 1);
    if (perClient) this.byClient.set(client, c + 1);
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        this.total--;
        dec(this.bySandbox, sandbox);
        if (perClient) dec(this.byClient, client);
        if (perNamespace) dec(this.byNamespace, namespace);
      },
    };
  }

  private acquirePublic(sandbox: string, client: string | undefined): { release: () => void } | SlotRefusal {
    if (this.publicTotal >= this.maxPublic) return { status: 503, cap: "public_global", message: "the proxy is at its capacity for requests without a token; retry later" };
    const s = this.publicBySandbox.get(sandbox) ?? 0;
    if (s >= this.maxPublicPerSandbox) {
      return { status: 429, cap: "public_sandbox", message: `too many concurrent requests without a token to this sandbox (limit ${this.maxPublicPerSandbox})` };
    }
    const perClient = this.maxPublicPerClient > 0 && client !== undefined;
    const c = perClient ? (this.publicByClient.get(client) ?? 0) : 0;
    if (perClient && c >= this.maxPublicPerClient) {
      return { status: 429, cap: "public_client", message: `too many concurrent requests without a token from this client (limit ${this.maxPublicPerClient})` };
    }
    this.total++;
    this.publicTotal++;
    this.publicBySandbox.set(sandbox, s + 1);
    if (perClient) this.publicByClient.set(client, c + 1);
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        this.total--;
        this.publicTotal--;
        dec(this.publicBySandbox, sandbox);
        if (perClient) dec(this.publicByClient, client);
      },
    };
  }
}

function dec(m: Map<string, number>, k: string): void {
  const n = (m.get(k) ?? 1) - 1;
  if (n <= 0) m.delete(k);
  else m.set(k, n);
}

/**
 * The global budget of bytes the proxy holds for slow readers. Streams report what they hold through a BufferShare;
 * while the total is over the budget, a stream holding more than SHARE_FLOOR_BYTES stops reading its guest until its
 * own client reads again, or (a WebSocket) until the budget has room: a stalled client never holds back one that keeps up.
 */
export class BufferBudget {
  private used = 0;
  private waiters: Array<() => void> = [];
  private overdraft: object | undefined;

  constructor(readonly limit: number) {}

  get bytes(): number {
    return this.used;
  }

  over(): boolean {
    return this.used >= this.limit;
  }

  add(delta: number): void {
    this.used += delta;
    if (delta < 0 && this.waiters.length && this.used < this.limit) this.wake();
  }

  /**
   * One WebSocket at a time may finish the frame it is reading while the budget is over: pausing mid-frame frees
   * nothing, and a frame as large as the budget would otherwise wait for itself. The others wait their turn.
   */
  takeOverdraft(owner: object): boolean {
    if (this.overdraft !== undefined && this.overdraft !== owner) return false;
    this.overdraft = owner;
    return true;
  }

  releaseOverdraft(owner: object): void {
    if (this.overdraft !== owner) return;
    this.overdraft = undefined;
    if (this.waiters.length) this.wake();
  }

  private wake(): void {
    const ws = this.waiters;
    this.waiters = [];
    for (const w of ws) w();
  }

  /**
   * Run `fn` once the total is under the budget or the overdraft is free (at once when under): for streams paused
   * where no client read wakes them. `fn` checks again and may wait again.
   */
  whenUnder(fn: () => void): void {
    if (this.used < this.limit) fn();
    else this.waiters.push(fn);
  }
}

/** Over the budget, a stream holding less than this still reads its guest: a client that keeps up is never held back. */
export const SHARE_FLOOR_BYTES = 64 * 1024;

/** One stream's share of the budget: what it holds now, and whether it may read more from its guest. */
export class BufferShare {
  private held = 0;
  private waiting = false;

  constructor(readonly budget: BufferBudget) {}

  get bytes(): number {
    return this.held;
  }

  /** Record what the stream holds now; false = stop reading the guest until the client reads. */
  set(bytes: number): boolean {
    if (bytes !== this.held) {
      this.budget.add(bytes - this.held);
      this.held = bytes;
    }
    return this.mayRead();
  }

  mayRead(): boolean {
    return this.held < SHARE_FLOOR_BYTES || !this.budget.over();
  }

  /** Run `fn` once when the budget may have room again (one pending call per share, however often it is asked). */
  whenUnder(fn: () => void): void {
    if (this.waiting) return;
    this.waiting = true;
    this.budget.whenUnder(() => {
      this.waiting = false;
      fn();
    });
  }

  /** May this stream go on reading the frame it is in the middle of, over the budget? (See BufferBudget.takeOverdraft.) */
  takeOverdraft(): boolean {
    return this.budget.takeOverdraft(this);
  }

  releaseOverdraft(): void {
    this.budget.releaseOverdraft(this);
  }

  release(): void {
    this.set(0);
    this.releaseOverdraft();
  }
}

/** Budgets kept at once; past it the ones without debt are forgotten (each comes back with a fresh burst). */
const PACED_NAMESPACES = 10_000;

/**
 * The per-namespace decode budget (RelayLimitOptions.chunkRatePerNamespace): each read of a chunked guest body
 * reserves its chunk count from its namespace's bucket, and a read that overdraws it pauses that stream for as long
 * as the bucket needs to refill. One tenant's 1-byte-chunk guests then cost the proxy's thread at most the rate,
 * whatever they send, and the other tenants' requests are not queued behind them (docs/envd-relay.md "Bounds").
 */
export class ChunkPacer {
  private readonly buckets = new Map<string, TokenBucket>();

  constructor(
    private readonly rate: number,
    private readonly clock: Pick<Clock, "monotonic" | "after"> = realClock,
  ) {}

  /** How long (ms) the stream that just decoded `chunks` chunks for `namespace` waits before reading on. */
  take(namespace: string, chunks: number): number {
    if (!(this.rate > 0)) return 0;
    let b = this.buckets.get(namespace);
    if (!b) {
      if (this.buckets.size >= PACED_NAMESPACES) for (const [ns, x] of this.buckets) if (x.reserve(0) === 0) this.buckets.delete(ns);
      b = new TokenBucket(this.rate, this.rate, this.clock);
      this.buckets.set(namespace, b);
    }
    return b.reserve(chunks);
  }
}
