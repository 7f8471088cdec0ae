// shared/kube/reviews.ts: what a server relying on delegated authn/authz counts on. A token or access the cluster
// answered is remembered for its TTL and asked again after; a review that could not be made is a refusal that is
// asked again on the next request; the cache never grows past its bound; concurrent misses share one review.
import { describe, expect, test } from "bun:test";
import { FakeClock } from "#shared/clock/index.ts";
import { AccessReviewer, KubeApiError, ReviewCache, TokenBucket, TokenReviewer } from "#shared/kube/index.ts";

type Body = { spec: Record<string, unknown> };

/** A KubeClient's create, answering from `answer` and counting calls. */
function fakeClient(answer: (body: Body) => object | Error) {
  const calls: Body[] = [];
  return {
    calls,
    client: {
      async create<T>(_res: unknown, obj: object): Promise<T> {
        calls.push(obj as Body);
        const a = answer(obj as Body);
        if (a instanceof Error) throw a;
        return a as T;
      },
    },
  };
}

const unreachable = () => new KubeApiError({ status: 0, verb: "create", path: "/apis/authentication.k8s.io/v1/tokenreviews", reason: "TransportError", message: "connect ECONNREFUSED 127.0.0.1:6443" });

describe("ReviewCache", () => {
  test("keeps a value for its TTL, drops it after, and keeps nothing for a TTL of 0", async () => {
    const clock = new FakeClock();
    const cache = new ReviewCache<number>(clock);
    let loads = 0;
    const load = async () => ++loads;
    expect(await cache.get("a", () => 1000, load)).toBe(1);
    expect(await cache.get("a", () => 1000, load)).toBe(1);
    clock.advance(1001);
    expect(await cache.get("a", () => 1000, load)).toBe(2);
    expect(await cache.get("b", () => 0, load)).toBe(3);
    expect(await cache.get("b", () => 0, load)).toBe(4);
  });

  test("concurrent misses for one key share one load", async () => {
    const cache = new ReviewCache<string>(new FakeClock());
    let loads = 0;
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const load = async () => {
      loads++;
      await gate;
      return "v";
    };
    const both = Promise.all([cache.get("k", () => 1000, load), cache.get("k", () => 1000, load)]);
    release();
    expect(await both).toEqual(["v", "v"]);
    expect(loads).toBe(1);
  });

  test("is bounded: past maxEntries the oldest entry goes", async () => {
    const cache = new ReviewCache<string>(new FakeClock(), 3);
    for (const k of ["a", "b", "c", "d"]) await cache.get(k, () => 60_000, async () => k);
    expect(cache.size).toBe(3);
    let reloaded = false;
    await cache.get("a", () => 60_000, async () => ((reloaded = true), "a"));
    expect(reloaded).toBe(true);
  });
});

describe("TokenReviewer", () => {
  const authenticated = { status: { authenticated: true, user: { username: "system:serviceaccount:ns:sa", uid: "u1", groups: ["system:serviceaccounts"] } } };

  test("an authenticated token gives the user and is not reviewed again within its TTL", async () => {
    const clock = new FakeClock();
    const f = fakeClient(() => authenticated);
    const r = new TokenReviewer({ client: f.client, authenticatedTtlMs: 120_000, rejectedTtlMs: 30_000, clock });
    expect(await r.review("tok")).toEqual({ ok: true, user: { name: "system:serviceaccount:ns:sa", uid: "u1", groups: ["system:serviceaccounts"] } });
    await r.review("tok");
    expect(f.calls).toHaveLength(1);
    expect(f.calls[0]!.spec).toEqual({ token: "tok" });
    clock.advance(120_001);
    await r.review("tok");
    expect(f.calls).toHaveLength(2);
  });

  test("a token the cluster rejects stays rejected for the rejected TTL", async () => {
    const clock = new FakeClock();
    const f = fakeClient(() => ({ status: { authenticated: false, error: "invalid bearer token" } }));
    const r = new TokenReviewer({ client: f.client, authenticatedTtlMs: 120_000, rejectedTtlMs: 30_000, clock });
    expect(await r.review("bad")).toEqual({ ok: false, reason: "the cluster did not authenticate the token" });
    await r.review("bad");
    expect(f.calls).toHaveLength(1);
    clock.advance(30_001);
    await r.review("bad");
    expect(f.calls).toHaveLength(2);
  });

  test("a review that fails is a refusal marked error, and is asked again at once", async () => {
    let down = true;
    const f = fakeClient(() => (down ? unreachable() : authenticated));
    const r = new TokenReviewer({ client: f.client, authenticatedTtlMs: 120_000, rejectedTtlMs: 30_000, clock: new FakeClock() });
    const first = await r.review("tok");
    expect(first.ok).toBe(false);
    expect(first).toMatchObject({ error: true, reason: expect.stringContaining("token review failed") });
    down = false;
    expect((await r.review("tok")).ok).toBe(true);
    expect(f.calls).toHaveLength(2);
  });

  test("audiences go into the spec when given", async () => {
    const f = fakeClient(() => authenticated);
    const r = new TokenReviewer({ client: f.client, authenticatedTtlMs: 1, rejectedTtlMs: 1, audiences: ["kubelet"], clock: new FakeClock() });
    await r.review("tok");
    expect(f.calls[0]!.spec).toEqual({ token: "tok", audiences: ["kubelet"] });
  });
});

describe("AccessReviewer", () => {
  const user = { name: "alice", groups: ["devs", "system:authenticated"] };
  const attrs = { resourceAttributes: { verb: "get", resource: "nodes", subresource: "proxy", name: "n1", version: "v1", group: "" } };

  test("sends the user and attributes as the spec; allowed and denied are each cached for their TTL", async () => {
    const clock = new FakeClock();
    let allowed = true;
    const f = fakeClient(() => ({ status: { allowed, ...(allowed ? {} : { reason: "no RBAC policy matched" }) } }));
    const r = new AccessReviewer({ client: f.client, allowedTtlMs: 300_000, deniedTtlMs: 30_000, clock });
    expect(await r.review(user, attrs)).toEqual({ allowed: true });
    expect(f.calls[0]!.spec).toEqual({ user: "alice", groups: ["devs", "system:authenticated"], ...attrs });
    allowed = false;
    expect((await r.review(user, attrs)).allowed).toBe(true); // still the cached answer
    clock.advance(300_001);
    expect(await r.review(user, attrs)).toEqual({ allowed: false, reason: "no RBAC policy matched" });
    clock.advance(29_000);
    await r.review(user, attrs);
    expect(f.calls).toHaveLength(2);
    clock.advance(2_000);
    await r.review(user, attrs);
    expect(f.calls).toHaveLength(3);
  });

  test("another name, verb or user is another review", async () => {
    const f = fakeClient(() => ({ status: { allowed: true } }));
    const r = new AccessReviewer({ client: f.client, allowedTtlMs: 300_000, deniedTtlMs: 30_000, clock: new FakeClock() });
    await r.review(user, attrs);
    await r.review(user, { resourceAttributes: { ...attrs.resourceAttributes, name: "n2" } });
    await r.review(user, { resourceAttributes: { ...attrs.resourceAttributes, verb: "create" } });
    await r.review({ ...user, name: "bob" }, attrs);
    expect(f.calls).toHaveLength(4);
  });

  test("a review that fails is a denial marked error and is not cached", async () => {
    let down = true;
    const f = fakeClient(() => (down ? unreachable() : { status: { allowed: true } }));
    const r = new AccessReviewer({ client: f.client, allowedTtlMs: 300_000, deniedTtlMs: 30_000, clock: new FakeClock() });
    const d = await r.review(user, attrs);
    expect(d).toMatchObject({ allowed: false, error: true, reason: expect.stringContaining("authorization review failed") });
    down = false;
    expect(await r.review(user, attrs)).toEqual({ allowed: true });
  });
});

// A made-up bearer token is a TokenReview an anonymous client makes the server send (docs/decisions.md
// "review-floods"): the reviews take from their own bucket without waiting, are capped in flight, and rejected
// tokens live in their own cache, so a flood spends at most the bucket, answers at once, and evicts no verified token.
describe("TokenReviewer under a flood of made-up tokens", () => {
  const VALID = "valid-token";
  const answer = (b: Body) =>
    b.spec.token === VALID ? { status: { authenticated: true, user: { username: "alice", groups: ["dev"] } } } : { status: { authenticated: false } };

  test("10,000 random tokens make at most the bucket's worth of reviews, answer quickly, and a cached valid token needs none", async () => {
    const clock = new FakeClock();
    const { client, calls } = fakeClient(answer);
    const r = new TokenReviewer({ client, authenticatedTtlMs: 60_000, rejectedTtlMs: 60_000, clock, limiter: new TokenBucket(5, 50, clock) });
    expect(await r.review(VALID)).toMatchObject({ ok: true, user: { name: "alice" } });
    const start = performance.now();
    const verdicts = await Promise.all(Array.from({ length: 10_000 }, () => r.review(crypto.randomUUID())));
    const tookMs = performance.now() - start;
    expect(calls.length).toBeLessThanOrEqual(50);
    expect(verdicts.every((v) => !v.ok)).toBe(true);
    expect(verdicts.filter((v) => !v.ok && v.throttled).length).toBeGreaterThanOrEqual(10_000 - 50);
    expect(tookMs).toBeLessThan(2_000); // nothing waits on the bucket (a queue at 5 qps would take half an hour)
    const before = calls.length;
    expect(await r.review(VALID)).toMatchObject({ ok: true, user: { name: "alice" } });
    expect(calls.length).toBe(before);
  });

  test("rejected tokens cannot evict a verified one, and a throttled token is asked again once the bucket refills", async () => {
    const clock = new FakeClock();
    const { client, calls } = fakeClient(answer);
    const r = new TokenReviewer({ client, authenticatedTtlMs: 60_000, rejectedTtlMs: 60_000, clock, maxEntries: 10, maxRejectedEntries: 10, limiter: new TokenBucket(1000, 1000, clock) });
    await r.review(VALID);
    for (let i = 0; i < 500; i++) await r.review(`bogus-${i}`);
    const before = calls.length;
    expect(await r.review(VALID)).toMatchObject({ ok: true });
    expect(calls.length).toBe(before);

    const tight = new TokenReviewer({ client, authenticatedTtlMs: 60_000, rejectedTtlMs: 60_000, clock, limiter: new TokenBucket(1, 1, clock) });
    expect(await tight.review("bogus-a")).toMatchObject({ ok: false });
    expect(await tight.review(VALID)).toMatchObject({ ok: false, throttled: true, error: true });
    clock.advance(1000);
    expect(await tight.review(VALID)).toMatchObject({ ok: true });
  });

  test("reviews in flight are capped: with the apiserver stalled, the rest are refused at once instead of queueing", async () => {
    let started = 0;
    const release: (() => void)[] = [];
    const client = {
      create<T>(): Promise<T> {
        started++;
        return new Promise<T>((resolve) => release.push(() => resolve({ status: { authenticated: false } } as T)));
      },
    };
    const r = new TokenReviewer({ client, authenticatedTtlMs: 60_000, rejectedTtlMs: 60_000, maxInFlight: 4, limiter: new TokenBucket(1000, 1000) });
    const pending = Array.from({ length: 100 }, (_, i) => r.review(`t-${i}`));
    const refused = await Promise.all(pending.slice(4));
    expect(started).toBe(4);
    expect(refused.every((v) => !v.ok && v.throttled)).toBe(true);
    for (const f of release) f();
    expect((await Promise.all(pending.slice(0, 4))).every((v) => !v.ok && !v.throttled)).toBe(true);
    // The cap frees with its reviews.
    const after = r.review("after");
    expect(started).toBe(5);
    release[4]!();
    expect(await after).toMatchObject({ ok: false });
  });
});
