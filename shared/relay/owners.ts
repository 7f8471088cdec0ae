// Who holds a sandbox, and what access token it expects (docs/envd-relay.md "Resolution"):
//   1. the owner cache (60 s, 4096 entries; filled as soon as a node read succeeds, before the caller is judged);
//   2. the fleet snapshot (fresh nodes only; filtered to --namespace when it is set), then a root read of the
//      claim for its token;
//   3. a live probe of every fresh node (≤16 at once, 5 s overall), only for a token that carries the lane tag
//      of the requested id (shared/e2b/tokens.ts: checkable offline with the envd secret, so only a token the e2b
//      surface issued for that id gets here), under a budget per client address (50/s, burst 100) and a
//      replica-wide one (200/s, burst 400), with a negative cache of probe misses (10 s); a probe hit is admitted
//      (and cached) only when the presented token derives from it.
// Before any of it, the id and the token must have the shapes the surface issues (sb_ + 16 hex; 64 or 96 hex digits):
// a caller with no valid credential never costs a node read beyond one per listed id (then cached), and never a
// probe. The proxy stores no per-sandbox secret: the expected token is recomputed from the claim token.
// A Pod's microVM (vk-sandbox's `vk-sandbox.pod-uid` stamp on the entry or the node's row) is never an owner here:
// the relay has no Kubernetes identity to check the Pod's RBAC with, so it reads as unknown on every path.
import { type Clock, realClock } from "../clock/index.ts";
import { TokenBucket } from "../kube/index.ts";
import { errorChain, type Logger } from "../log/index.ts";
import type { FleetSource } from "../fleet/index.ts";
import { FANOUT_CONCURRENCY, firstHit } from "../fleet/index.ts";
import { findEntry, isPodBacked } from "../fleet/index.ts";
import { SandboxdClient } from "../sandboxd/index.ts";
import { SANDBOX_ID_RE, isSandboxdError } from "../sandboxd/index.ts";
import { claimIdOf } from "../envd-token/index.ts";
import { carriesLaneTag, deriveAccessToken, envdAccessToken, publicTrafficStamp, safeEqual } from "../envd-token/index.ts";

export const OWNER_TTL_MS = 60_000;
export const OWNER_CACHE_MAX = 4096;
export const PROBE_RATE_PER_S = 200;
export const PROBE_BURST = 400;
/**
 * How long a probe waits for the nodes, as long as the inventory path's node read: only a token the surface issued
 * for the id probes, so a longer wait costs no junk anything, and 500 ms (upstream's) turned a loaded node's slow
 * answer into "sandbox was not found" for a sandbox created a moment before (issue 27: a loaded machine's rig).
 */
export const PROBE_BUDGET_MS = 5_000;
export const PROBE_PER_CLIENT_RATE_PER_S = 50;
export const PROBE_PER_CLIENT_BURST = 100;
/** How long a probe miss for an id is remembered (a released sandbox, or an id no node holds). */
export const NEGATIVE_TTL_MS = 10_000;
const CLIENTS_MAX = 4096;

/** Access tokens the e2b surface issues: lane-tagged (96 hex digits), or untagged from before tags (64). */
export const ACCESS_TOKEN_RE = /^(?:[0-9a-f]{32})?[0-9a-f]{64}$/;
const READ_TIMEOUT_MS = 5_000;

export interface Owner {
  claimId: string;
  address: string;
  claimToken: string;
  accessToken: string;
  /** The claim_ref's namespace (the tenant, for the per-namespace relay cap); "" when the claim names none. */
  namespace: string;
  /** The create's public-ports choice (the claim's metadata stamp); undefined: a claim made before the stamp. */
  publicTraffic?: boolean | undefined;
}

export type Resolution =
  | { kind: "ok"; owner: Owner; source: "cache" | "inventory" | "probe" }
  | { kind: "bad-token" }
  | { kind: "unavailable"; reason: "unknown" | "node-read-failed" | "probe-budget" | "no-address" };

/** A TTL set of ids, bounded like the owner cache (when full: expired entries go, then everything). */
class NegativeCache {
  private readonly until = new Map<string, number>();
  constructor(private readonly clock: Clock) {}
  has(id: string): boolean {
    const t = this.until.get(id);
    if (t === undefined) return false;
    if (t > this.clock.now()) return true;
    this.until.delete(id);
    return false;
  }
  add(id: string): void {
    const now = this.clock.now();
    if (this.until.size >= OWNER_CACHE_MAX) {
      for (const [k, t] of this.until) if (t <= now) this.until.delete(k);
      if (this.until.size >= OWNER_CACHE_MAX) this.until.clear();
    }
    this.until.set(id, now + NEGATIVE_TTL_MS);
  }
  drop(id: string): void {
    this.until.delete(id);
  }
}

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

export interface ResolveContext {
  /** The caller's address (per-client probe budget); undefined shares one budget. */
  client?: string | undefined;
}

export class OwnerResolver {
  readonly cache: OwnerCache;
  readonly misses: NegativeCache;
  private readonly bucket: TokenBucket;
  private readonly perClient = new Map<string, TokenBucket>();
  private readonly clients = new Map<string, SandboxdClient>();
  private readonly clock: Clock;

  constructor(private readonly o: OwnerResolverOptions) {
    this.clock = o.clock ?? realClock;
    this.cache = new OwnerCache(OWNER_TTL_MS, OWNER_CACHE_MAX, this.clock);
    this.misses = new NegativeCache(this.clock);
    this.bucket = new TokenBucket(PROBE_RATE_PER_S, PROBE_BURST, this.clock);
  }

  private clientBucket(client: string | undefined): TokenBucket {
    const key = client ?? "";
    let b = this.perClient.get(key);
    if (!b) {
      // Bounded: when full, every client starts over with a full burst (costs at most one burst each).
      if (this.perClient.size >= CLIENTS_MAX) this.perClient.clear();
      b = new TokenBucket(PROBE_PER_CLIENT_RATE_PER_S, PROBE_PER_CLIENT_BURST, this.clock);
      this.perClient.set(key, b);
    }
    return b;
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
  prime(claimId: string, address: string, claimToken: string, namespace: string, publicTraffic?: boolean): void {
    this.misses.drop(claimId);
    this.cache.set(this.ownerOf(claimId, address, claimToken, namespace, publicTraffic));
  }

  private ownerOf(claimId: string, address: string, claimToken: string, namespace: string, publicTraffic: boolean | undefined): Owner {
    return { claimId, address, claimToken, accessToken: envdAccessToken(this.o.envdSecret, claimId, claimToken), namespace, publicTraffic };
  }

  private matches(owner: Owner, presented: string): boolean {
    // accessTokenMatches' rule, with the tagged token the owner was cached with: an issued token costs no HMAC per
    // request (it cost two, docs/performance.md); only the untagged form of sandboxes made before tags derives one.
    if (presented.length === owner.accessToken.length) return safeEqual(presented, owner.accessToken);
    return safeEqual(presented, deriveAccessToken(this.o.envdSecret, owner.claimToken));
  }

  /**
   * Resolve `requestedId`. With `presentedToken` the token is verified (401 material on mismatch); without it
   * (a signed file URL) the owner is only located, from the cache or the fleet view, never by a probe.
   */
  async resolve(requestedId: string, presentedToken: string | undefined, ctx: ResolveContext = {}): Promise<Resolution> {
    const claimId = claimIdOf(requestedId);
    // Shapes first: no id or token the surface could have issued costs nothing (not even a cache probe).
    if (!SANDBOX_ID_RE.test(claimId)) return { kind: "unavailable", reason: "unknown" };
    if (presentedToken !== undefined && !ACCESS_TOKEN_RE.test(presentedToken)) return { kind: "unavailable", reason: "unknown" };
    const judge = (owner: Owner, source: "cache" | "inventory" | "probe"): Resolution =>
      presentedToken === undefined || this.matches(owner, presentedToken) ? { kind: "ok", owner, source } : { kind: "bad-token" };

    const cached = this.cache.get(claimId);
    if (cached) return judge(cached, "cache");

    const nodes = this.o.fleet.nodes();
    const hit = findEntry(nodes, requestedId, this.o.namespace || undefined);
    if (hit) {
      if (isPodBacked(hit.entry.metadata)) return { kind: "unavailable", reason: "unknown" };
      if (!hit.node.address) return { kind: "unavailable", reason: "no-address" };
      try {
        const row = await this.client(hit.node.address).get(hit.entry.id);
        if (isPodBacked(row.metadata)) return { kind: "unavailable", reason: "unknown" };
        if (!row.token) return { kind: "unavailable", reason: "node-read-failed" };
        const owner = this.ownerOf(hit.entry.id, hit.node.address, row.token, claimRefNamespace(row.claim_ref), publicTrafficStamp(row.metadata));
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

    // Not published yet (or outside --namespace): probe, only for a token the surface issued for this id (its lane
    // tag verifies offline), so anonymous junk never reaches a node. An unpublished id is never confirmed to a caller
    // without a valid token: a signed file URL (no token to check) and an untagged token (sandboxes made before
    // tags, long since published) do not probe at all.
    if (presentedToken === undefined || !carriesLaneTag(this.o.envdSecret, claimId, presentedToken)) return { kind: "unavailable", reason: "unknown" };
    if (this.misses.has(claimId)) return { kind: "unavailable", reason: "unknown" };
    if (!this.clientBucket(ctx.client).tryAcquire() || !this.bucket.tryAcquire()) return { kind: "unavailable", reason: "probe-budget" };
    const addresses = nodes.filter((n) => n.address).map((n) => n.address);
    const probed = await this.probe(claimId, addresses);
    const found = probed.owner;
    if (!found) {
      // Every node said 404: unknown, and remembered. No node to ask proves nothing either way (not remembered). A
      // node that failed or did not answer in time may hold it: "unavailable" (the SDKs' state unknown), never "not
      // found", which the SDKs take as the sandbox being gone.
      if (probed.absent) this.misses.add(claimId);
      return { kind: "unavailable", reason: probed.absent || addresses.length === 0 ? "unknown" : "node-read-failed" };
    }
    // A mismatch on this path reads as "unknown", exactly like an id nobody holds.
    if (!this.matches(found, presentedToken)) return { kind: "unavailable", reason: "unknown" };
    this.cache.set(found);
    return { kind: "ok", owner: found, source: "probe" };
  }

  /**
   * Every fresh node, ≤16 at once, PROBE_BUDGET_MS overall; the first node that holds the claim wins. `absent` is
   * true only when every node answered 404, and at least one was asked (a slow or failing node proves nothing, and
   * neither does an empty view, so neither fills the negative cache).
   */
  private async probe(claimId: string, addresses: string[]): Promise<{ owner: Owner | undefined; absent: boolean }> {
    let notFound = 0;
    const owner = await firstHit(
      addresses,
      FANOUT_CONCURRENCY,
      async (address, signal) => {
        try {
          const row = await this.client(address).get(claimId, { signal, timeoutMs: PROBE_BUDGET_MS });
          // A Pod's VM counts as absent (and so fills the negative cache like an id nobody holds).
          if (isPodBacked(row.metadata)) {
            notFound++;
            return undefined;
          }
          return row.token ? this.ownerOf(claimId, address, row.token, claimRefNamespace(row.claim_ref), publicTrafficStamp(row.metadata)) : undefined;
        } catch (err) {
          if (isSandboxdError(err) && err.status === 404) notFound++;
          throw err;
        }
      },
      { signal: AbortSignal.timeout(PROBE_BUDGET_MS) },
    );
    return { owner, absent: owner === undefined && addresses.length > 0 && notFound === addresses.length };
  }
}

/** The namespace part of a claim_ref (`<ns>/<name>`); "" when it has none (such a claim is no tenant's). */
function claimRefNamespace(claimRef: string | undefined): string {
  const i = claimRef?.indexOf("/") ?? -1;
  return i > 0 ? claimRef!.slice(0, i) : "";
}
