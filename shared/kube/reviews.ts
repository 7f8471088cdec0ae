// Delegated authentication and authorization against the cluster: a bearer token checked with a TokenReview, an
// access checked with a SubjectAccessReview, both answers kept briefly in a bounded cache. What a server does with
// the answer (which credential comes first, which attributes a request maps to, what it replies) stays with it.
//
// A TokenReview is what an anonymous client can make the server send (any made-up bearer token is a miss), so token
// reviews are bounded without waiting (docs/decisions.md "review-floods"): a bucket of their own taken with
// tryAcquire, a cap on reviews in flight, and an empty bucket or a full cap is a refusal at once, never a queue.
// Rejected tokens live in their own smaller cache, so a flood of unknown tokens never evicts a verified one.
//
// Fail closed: a review that could not be made (apiserver unreachable, a 5xx, a refused review) is an outcome with
// `error: true`, a refusal to the caller, and is never cached, so the next request asks again.
import { createHash } from "node:crypto";
import { type Clock, realClock } from "../clock/index.ts";
import type { KubeClient } from "./client.ts";
import { TokenBucket } from "./rate-limit.ts";
import { SubjectAccessReviews, TokenReviews } from "./resources.ts";

export interface ReviewedUser {
  name: string;
  uid?: string;
  groups: string[];
  extra?: Record<string, string[]>;
}

/** `error`: no answer from the cluster (not cached); `throttled`: not asked at all, the review budget was spent. */
export type TokenVerdict = { ok: true; user: ReviewedUser } | { ok: false; reason: string; error?: boolean; throttled?: boolean };

export interface AccessVerdict {
  allowed: boolean;
  reason?: string;
  /** The review itself failed: a denial that is not cached. */
  error?: boolean;
}

/** One of the two attribute kinds of a SubjectAccessReview spec. */
export type AccessAttributes =
  | {
      resourceAttributes: {
        verb: string;
        group?: string;
        version?: string;
        resource: string;
        subresource?: string;
        name?: string;
        namespace?: string;
      };
    }
  | { nonResourceAttributes: { verb: string; path: string } };

/** Entries a review cache keeps at most: past it the oldest go first, so a flood of distinct keys cannot grow it. */
export const REVIEW_CACHE_MAX_ENTRIES = 4096;
/** Rejected tokens kept at most (their own cache: a flood of them cannot push out the verified ones). */
export const REJECTED_TOKEN_CACHE_MAX_ENTRIES = 1024;
/** TokenReviews per second and burst, by default: far above real clients' distinct tokens, far below a flood. */
export const TOKEN_REVIEW_QPS = 20;
export const TOKEN_REVIEW_BURST = 50;
/** TokenReviews in flight at most, by default: a slow apiserver cannot make them pile up. */
export const TOKEN_REVIEW_MAX_IN_FLIGHT = 16;

/** An expiring, bounded cache; concurrent misses for one key share one lookup. A ttl of 0 keeps nothing. */
export class ReviewCache<V> {
  private readonly entries = new Map<string, { value: V; expires: number }>();
  private readonly inflight = new Map<string, Promise<V>>();

  constructor(
    private readonly clock: Pick<Clock, "now"> = realClock,
    private readonly maxEntries = REVIEW_CACHE_MAX_ENTRIES,
  ) {}

  get size(): number {
    return this.entries.size;
  }

  /** The live value for the key, without loading. */
  peek(key: string): V | undefined {
    const hit = this.entries.get(key);
    if (hit && hit.expires > this.clock.now()) return hit.value;
    if (hit) this.entries.delete(key);
    return undefined;
  }

  /** Stores a value for `ttl` ms (0: nothing), evicting the oldest past the bound. */
  put(key: string, value: V, ttl: number): void {
    if (!(ttl > 0)) return;
    this.entries.delete(key); // re-inserted last: the newest
    this.entries.set(key, { value, expires: this.clock.now() + ttl });
    if (this.entries.size > this.maxEntries) this.entries.delete(this.entries.keys().next().value as string);
  }

  async get(key: string, ttlFor: (v: V) => number, load: () => Promise<V>): Promise<V> {
    const hit = this.entries.get(key);
    if (hit && hit.expires > this.clock.now()) return hit.value;
    if (hit) this.entries.delete(key);
    const running = this.inflight.get(key);
    if (running) return running;
    const p = load()
      .then((value) => {
        this.put(key, value, ttlFor(value));
        return value;
      })
      .finally(() => this.inflight.delete(key));
    this.inflight.set(key, p);
    return p;
  }
}

export interface TokenReviewerOptions {
  client: Pick<KubeClient, "create">;
  /** How long an authenticated token is trusted without asking again. */
  authenticatedTtlMs: number;
  /** How long a token the cluster rejected stays rejected. */
  rejectedTtlMs: number;
  /** TokenReview `spec.audiences`; empty: the apiserver's own. */
  audiences?: string[];
  clock?: Pick<Clock, "now">;
  /** Verified tokens kept at most. */
  maxEntries?: number;
  /** Rejected tokens kept at most (default REJECTED_TOKEN_CACHE_MAX_ENTRIES). */
  maxRejectedEntries?: number;
  /** Taken without waiting, one token per review (default TOKEN_REVIEW_QPS / TOKEN_REVIEW_BURST). */
  limiter?: TokenBucket;
  /** Reviews in flight at most (default TOKEN_REVIEW_MAX_IN_FLIGHT). */
  maxInFlight?: number;
}

const THROTTLED: TokenVerdict = { ok: false, reason: "too many token reviews right now; the token was not reviewed", error: true, throttled: true };

interface TokenReviewStatus {
  status?: {
    authenticated?: boolean;
    error?: string;
    user?: { username?: string; uid?: string; groups?: string[]; extra?: Record<string, string[]> };
  };
}

export class TokenReviewer {
  /** Verified tokens only. */
  private readonly cache: ReviewCache<TokenVerdict>;
  private readonly rejected: ReviewCache<TokenVerdict>;
  private readonly limiter: TokenBucket;
  private readonly maxInFlight: number;
  private inFlight = 0;

  constructor(private readonly o: TokenReviewerOptions) {
    this.cache = new ReviewCache(o.clock, o.maxEntries);
    this.rejected = new ReviewCache(o.clock, o.maxRejectedEntries ?? REJECTED_TOKEN_CACHE_MAX_ENTRIES);
    this.limiter = o.limiter ?? new TokenBucket(TOKEN_REVIEW_QPS, TOKEN_REVIEW_BURST);
    this.maxInFlight = o.maxInFlight ?? TOKEN_REVIEW_MAX_IN_FLIGHT;
  }

  /** The cache is keyed by the token's SHA-256, so the process never holds a token it was shown for long. */
  review(token: string): Promise<TokenVerdict> {
    const key = createHash("sha256").update(token).digest("hex");
    const rejected = this.rejected.peek(key);
    if (rejected) return Promise.resolve(rejected);
    return this.cache.get(
      key,
      (v) => (v.ok ? this.o.authenticatedTtlMs : 0),
      async () => {
        if (this.inFlight >= this.maxInFlight || !this.limiter.tryAcquire()) return THROTTLED;
        this.inFlight++;
        try {
          const v = await this.ask(token);
          if (!v.ok && !v.error) this.rejected.put(key, v, this.o.rejectedTtlMs);
          return v;
        } finally {
          this.inFlight--;
        }
      },
    );
  }

  private async ask(token: string): Promise<TokenVerdict> {
    try {
      const r = await this.o.client.create<TokenReviewStatus>(TokenReviews, {
        apiVersion: "authentication.k8s.io/v1",
        kind: "TokenReview",
        spec: { token, ...(this.o.audiences?.length ? { audiences: this.o.audiences } : {}) },
      });
      const u = r.status?.user;
      if (!r.status?.authenticated || !u?.username) return { ok: false, reason: "the cluster did not authenticate the token" };
      return {
        ok: true,
        user: {
          name: u.username,
          ...(u.uid ? { uid: u.uid } : {}),
          groups: u.groups ?? [],
          ...(u.extra ? { extra: u.extra } : {}),
        },
      };
    } catch (e) {
      return { ok: false, reason: `token review failed: ${(e as Error).message}`, error: true };
    }
  }
}

export interface AccessReviewerOptions {
  client: Pick<KubeClient, "create">;
  allowedTtlMs: number;
  deniedTtlMs: number;
  clock?: Pick<Clock, "now">;
  maxEntries?: number;
}

interface SarStatus {
  status?: { allowed?: boolean; denied?: boolean; reason?: string; evaluationError?: string };
}

/** The SubjectAccessReview `spec` for a user and attributes (also the cache key, serialized). */
export function accessReviewSpec(user: ReviewedUser, attributes: AccessAttributes): Record<string, unknown> {
  return {
    user: user.name,
    groups: user.groups,
    ...(user.uid ? { uid: user.uid } : {}),
    ...(user.extra ? { extra: user.extra } : {}),
    ...attributes,
  };
}

export class AccessReviewer {
  private readonly cache: ReviewCache<AccessVerdict>;

  constructor(private readonly o: AccessReviewerOptions) {
    this.cache = new ReviewCache(o.clock, o.maxEntries);
  }

  review(user: ReviewedUser, attributes: AccessAttributes): Promise<AccessVerdict> {
    const spec = accessReviewSpec(user, attributes);
    return this.cache.get(
      JSON.stringify(spec),
      (d) => (d.error ? 0 : d.allowed ? this.o.allowedTtlMs : this.o.deniedTtlMs),
      async () => {
        try {
          const r = await this.o.client.create<SarStatus>(SubjectAccessReviews, {
            apiVersion: "authorization.k8s.io/v1",
            kind: "SubjectAccessReview",
            spec,
          });
          const reason = r.status?.reason || r.status?.evaluationError;
          return { allowed: r.status?.allowed === true, ...(reason ? { reason } : {}) };
        } catch (e) {
          return { allowed: false, reason: `authorization review failed: ${(e as Error).message}`, error: true };
        }
      },
    );
  }
}
