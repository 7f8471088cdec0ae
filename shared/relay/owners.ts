// Who holds a sandbox, and what access token it expects (docs/envd-relay.md "Resolution"):
//   1. the owner cache (60 s, 4096 entries; filled as soon as a node read succeeds, before the caller is judged);
//   2. the fleet snapshot (fresh nodes only; filtered to --namespace when it is set), then a root read of the
//      claim for its token;
//   3. a live probe of every fresh node (≤16 at once, 500 ms overall) under a replica-wide token bucket
//      (200/s, burst 400); a probe hit is admitted (and cached) only when the presented token derives from it.
// The proxy stores no per-sandbox secret: the expected token is recomputed from the claim token.
import { type Clock, realClock } from "../clock/index.ts";
import { TokenBucket } from "../kube/index.ts";
import { errorChain, type Logger } from "../log/index.ts";
import type { FleetSource } from "../fleet/index.ts";
import { FANOUT_CONCURRENCY, firstHit } from "../fleet/index.ts";
import { findEntry } from "../fleet/index.ts";
import { SandboxdClient } from "../sandboxd/index.ts";
import { isSandboxdError } from "../sandboxd/index.ts";
import { claimIdOf } from "../e2b/index.ts";
import { deriveAccessToken, safeEqual } from "../e2b/index.ts";

export const OWNER_TTL_MS = 60_000;
export const OWNER_CACHE_MAX = 4096;
export const PROBE_RATE_PER_S = 200;
export const PROBE_BURST = 400;
export const PROBE_BUDGET_MS = 500;
const READ_TIMEOUT_MS = 5_000;

export interface Owner {
  claimId: string;
  address: string;
  claimToken: string;
  accessToken: string;
}

export type Resolution =
  | { kind: "ok"; owner: Owner; source: "cache" | "inventory" | "probe" }
  | { kind: "bad-token" }
  | { kind: "unavailable"; reason: "unknown" | "node-read-failed" | "probe-budget" | "no-address" };

/** A TTL map with the spec's overflow rule: when full, drop expired entries; if still full, clear everything. */
export class OwnerCache {
  private readonly entries = new Map<string, { owner: Owner; until: number }>();
  constructor(
    private readonly ttlMs = OWNER_TTL_MS,
    private readonly max = OWNER_CACHE_MAX,
    private readonly clock: Clock = realClock,
  ) {}
  get(claimId: string): Owner | undefined {
    const e = this.entries.get(claimId);
    if (!e) return undefined;
    if (e.until <= this.clock.now()) {
      this.entries.delete(claimId);
      return undefined;
    }
    return e.owner;
  }
  set(owner: Owner): void {
    if (!this.entries.has(owner.claimId) && this.entries.size >= this.max) {
      const t = this.clock.now();
      for (const [k, e] of this.entries) if (e.until <= t) this.entries.delete(k);
      if (this.entries.size >= this.max) this.entries.clear();
    }
    this.entries.set(owner.claimId, { owner, until: this.clock.now() + this.ttlMs });
  }
  drop(claimId: string): void {
    this.entries.delete(claimId);
  }
  get size(): number {
    return this.entries.size;
  }
}

export interface OwnerResolverOptions {
  fleet: FleetSource;
  envdSecret: string;
  rootToken: string;
  /** Inventory lookups are filtered to this namespace; empty = all. Not an access boundary (probes ignore it). */
  namespace: string;
  log: Logger;
  clock?: Clock;
}

export class OwnerResolver {
  readonly cache: OwnerCache;
  private readonly bucket: TokenBucket;
  private readonly clients = new Map<string, SandboxdClient>();

  constructor(private readonly o: OwnerResolverOptions) {
    this.cache = new OwnerCache(OWNER_TTL_MS, OWNER_CACHE_MAX, o.clock);
    this.bucket = new TokenBucket(PROBE_RATE_PER_S, PROBE_BURST, o.clock);
  }

  client(address: string): SandboxdClient {
    let c = this.clients.get(address);
    if (!c) {
      c = new SandboxdClient({ baseUrl: SandboxdClient.baseUrlFor(address), token: this.o.rootToken, log: this.o.log, timeoutMs: READ_TIMEOUT_MS, retry: { attempts: 1 } });
      this.clients.set(address, c);
    }
    return c;
  }

  /** Cache an owner learnt elsewhere (the in-process e2b surface right after a claim): no node read needed. */
  prime(claimId: string, address: string, claimToken: string): void {
    this.cache.set(this.ownerOf(claimId, address, claimToken));
  }

  private ownerOf(claimId: string, address: string, claimToken: string): Owner {
    return { claimId, address, claimToken, accessToken: deriveAccessToken(this.o.envdSecret, claimToken) };
  }

  /**
   * Resolve `requestedId`. With `presentedToken` the token is verified (401 material on mismatch); without it
   * (a signed file URL) the owner is only located, from the cache or the fleet view, never by a probe.
   */
  async resolve(requestedId: string, presentedToken: string | undefined): Promise<Resolution> {
    const claimId = claimIdOf(requestedId);
    const judge = (owner: Owner, source: "cache" | "inventory" | "probe"): Resolution =>
      presentedToken === undefined || safeEqual(presentedToken, owner.accessToken) ? { kind: "ok", owner, source } : { kind: "bad-token" };

    const cached = this.cache.get(claimId);
    if (cached) return judge(cached, "cache");

    const nodes = this.o.fleet.nodes();
    const hit = findEntry(nodes, requestedId, this.o.namespace || undefined);
    if (hit) {
      if (!hit.node.address) return { kind: "unavailable", reason: "no-address" };
      try {
        const row = await this.client(hit.node.address).get(hit.entry.id);
        if (!row.token) return { kind: "unavailable", reason: "node-read-failed" };
        const owner = this.ownerOf(hit.entry.id, hit.node.address, row.token);
        this.cache.set(owner);
        return judge(owner, "inventory");
      } catch (err) {
        if (isSandboxdError(err) && err.status === 404) return { kind: "unavailable", reason: "unknown" };
        // The operator's only clue to a node-side fault (a TLS node whose certificate this process does not trust,
        // a wrong name, a refused connection): the client just sees 502. Names the node, never sent to the client.
        this.o.log.warn({ node: hit.node.name, address: hit.node.address, err: errorChain(err) }, "owner read failed");
        return { kind: "unavailable", reason: "node-read-failed" };
      }
    }

    // Not published yet (or outside --namespace): probe, under the replica-wide budget. An unpublished id is never
    // confirmed to a caller without a valid token, so a signed file URL (no token to check) does not probe at all.
    if (presentedToken === undefined) return { kind: "unavailable", reason: "unknown" };
    if (!this.bucket.tryAcquire()) return { kind: "unavailable", reason: "probe-budget" };
    const found = await this.probe(claimId, nodes.filter((n) => n.address).map((n) => n.address));
    if (!found) return { kind: "unavailable", reason: "unknown" };
    // A mismatch on this path reads as "unknown", exactly like an id nobody holds.
    if (!safeEqual(presentedToken, found.accessToken)) return { kind: "unavailable", reason: "unknown" };
    this.cache.set(found);
    return { kind: "ok", owner: found, source: "probe" };
  }

  /** Every fresh node, ≤16 at once, 500 ms overall; the first node that holds the claim wins. */
  private probe(claimId: string, addresses: string[]): Promise<Owner | undefined> {
    return firstHit(
      addresses,
      FANOUT_CONCURRENCY,
      async (address, signal) => {
        const row = await this.client(address).get(claimId, { signal, timeoutMs: PROBE_BUDGET_MS });
        return row.token ? this.ownerOf(claimId, address, row.token) : undefined;
      },
      { signal: AbortSignal.timeout(PROBE_BUDGET_MS) },
    );
  }
}
