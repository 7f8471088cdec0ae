// Delegated authorization's safety net (issue 17): a SubjectAccessReview that fails (transport error, timeout, 5xx)
// is a denial and is never cached as a verdict; always-allowed paths match exactly (a trailing `*` is the only prefix
// form), so a path that merely starts like a probe is reviewed.
import { describe, expect, test } from "bun:test";
import { FakeClock } from "#shared/clock/index.ts";
import { KubeClient, type Transport } from "#shared/kube/index.ts";
import { Authorizer } from "#services/sandbox-apiserver/serving/authz.ts";
import { requestInfo } from "#services/sandbox-apiserver/serving/request-info.ts";

const alice = { name: "alice", groups: ["devs", "system:authenticated"] };
const get = requestInfo("GET", new URL("https://x/apis/agents.x-k8s.io/v1beta1/namespaces/a/sandboxes/x"));

type Answer = "allow" | "deny" | "500" | "throw" | "hang";

/** A kube client whose SubjectAccessReview answers as `next` says, counting the reviews it was asked for. */
function reviewer(timeoutMs = 30_000) {
  const state = { next: "allow" as Answer, reviews: 0 };
  const transport: Transport = async (_url, init) => {
    state.reviews++;
    const a = state.next;
    if (a === "throw") throw new Error("connect ECONNREFUSED 10.0.0.1:443");
    if (a === "hang") {
      return new Promise<Response>((_resolve, reject) => init.signal?.addEventListener("abort", () => reject(init.signal?.reason), { once: true }));
    }
    if (a === "500") return Response.json({ kind: "Status", code: 500, message: "etcdserver: leader changed" }, { status: 500 });
    return Response.json({ kind: "SubjectAccessReview", status: { allowed: a === "allow", ...(a === "deny" ? { reason: "no RBAC" } : {}) } });
  };
  const client = new KubeClient({ server: "https://kube.test" }, { transport, timeoutMs });
  return { state, client };
}

function authorizer(client: KubeClient, clock = new FakeClock(0)) {
  return new Authorizer({ reviewer: client, alwaysAllowPaths: ["/healthz", "/readyz", "/livez", "/openapi/*"], allowedTtlMs: 10_000, deniedTtlMs: 10_000, clock });
}

describe("a SubjectAccessReview that fails is a denial, and is not remembered", () => {
  for (const failure of ["throw", "500", "hang"] as const) {
    test(`${failure === "throw" ? "a transport error" : failure === "500" ? "a 5xx from kube-apiserver" : "no answer within the client's timeout"}: denied, then asked again`, async () => {
      const { state, client } = reviewer(50);
      const az = authorizer(client);
      state.next = failure;
      const d = await az.authorize(alice, get);
      expect(d.allowed).toBe(false);
      expect(d.error).toBe(true);
      expect(d.reason).toStartWith("authorization review failed:");
      expect(state.reviews).toBeGreaterThanOrEqual(1);
      // The cluster recovers: the very next request is reviewed again and allowed (no cached failure).
      const asked = state.reviews;
      state.next = "allow";
      expect(await az.authorize(alice, get)).toEqual({ allowed: true });
      expect(state.reviews).toBe(asked + 1);
    });
  }

  test("verdicts are cached both ways for their TTL, then asked again", async () => {
    const clock = new FakeClock(0);
    const { state, client } = reviewer();
    const az = authorizer(client, clock);
    state.next = "deny";
    expect(await az.authorize(alice, get)).toEqual({ allowed: false, reason: "no RBAC" });
    state.next = "allow";
    expect((await az.authorize(alice, get)).allowed).toBe(false);
    expect(state.reviews).toBe(1);
    clock.advance(10_001);
    expect((await az.authorize(alice, get)).allowed).toBe(true);
    expect(state.reviews).toBe(2);
  });

  test("with no review backend every non-exempt request is denied", async () => {
    const az = new Authorizer({ alwaysAllowPaths: ["/healthz"], allowedTtlMs: 10_000, deniedTtlMs: 10_000 });
    expect((await az.authorize(alice, get)).allowed).toBe(false);
    expect((await az.authorize(alice, requestInfo("GET", new URL("https://x/healthz")))).allowed).toBe(true);
  });
});

describe("always-allowed paths match exactly", () => {
  test("the probes themselves skip review; look-alikes are reviewed (and denied here)", async () => {
    const { state, client } = reviewer();
    state.next = "deny";
    const az = authorizer(client);
    for (const p of ["/healthz", "/readyz", "/livez", "/openapi/v2", "/openapi/v3/apis"]) {
      expect(az.alwaysAllowed(p)).toBe(true);
      expect((await az.authorize(alice, requestInfo("GET", new URL(`https://x${p}`)))).allowed).toBe(true);
    }
    const lookAlikes = ["/healthzfoo", "/healthz/../apis/agents.x-k8s.io/v1beta1/sandboxes", "/livez/x", "/readyz%2F..%2Fapis", "/openapi", "/HEALTHZ", "/healthz/"];
    for (const p of lookAlikes) {
      const path = new URL(`https://x${p}`).pathname;
      expect(az.alwaysAllowed(path)).toBe(false);
      expect((await az.authorize(alice, requestInfo("GET", new URL(`https://x${p}`)))).allowed).toBe(false);
    }
    expect(state.reviews).toBe(lookAlikes.length);
  });
});
