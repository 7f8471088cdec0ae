import { describe, expect, test } from "bun:test";
import { FakeClock } from "#shared/clock/index.ts";
import { KubeClient, type Transport } from "#shared/kube/index.ts";
import { Authenticator, fromRequestHeaders, identityHeaderNames } from "#services/sandbox-apiserver/serving/authn.ts";
import type { PeerCert } from "#services/sandbox-apiserver/serving/client-certs.ts";
import { forbiddenMessage, requestInfo } from "#services/sandbox-apiserver/serving/request-info.ts";

const cfg = { allowedNames: ["front-proxy-client"], usernameHeaders: ["X-Remote-User"], groupHeaders: ["X-Remote-Group"], extraHeaderPrefixes: ["X-Remote-Extra-"] };

describe("authentication", () => {
  test("front-proxy headers give user, groups and extras", () => {
    const h = new Headers([["X-Remote-User", "alice"], ["X-Remote-Group", "g1"], ["X-Remote-Group", "g2"], ["X-Remote-Extra-Scopes", "a"]]);
    expect(fromRequestHeaders(h, cfg)).toEqual({ name: "alice", groups: ["g1", "g2"], extra: { scopes: ["a"] } });
    expect(identityHeaderNames(cfg, h).sort()).toEqual(["x-remote-extra-scopes", "x-remote-group", "x-remote-user"]);
  });
  test("identity headers count only with a front-proxy certificate whose CN is allowed; everyone authenticated joins system:authenticated", async () => {
    const a = new Authenticator({ requestHeader: cfg, cacheTtlMs: 10_000, clock: new FakeClock(0) });
    const h = new Headers([["X-Remote-User", "alice"]]);
    expect(await a.authenticate(h, undefined)).toEqual({ ok: true, user: { name: "system:anonymous", groups: ["system:unauthenticated"] } });
    // A front-proxy certificate whose CN is not allowed is a failed credential (401), as kube-apiserver answers.
    expect(await a.authenticate(h, { source: "requestheader", commonName: "someone-else", organizations: [] })).toEqual({
      ok: false,
      message: 'front-proxy client certificate CN "someone-else" is not in the allowed names (front-proxy-client)',
    });
    expect(await a.authenticate(h, { source: "requestheader", commonName: "front-proxy-client", organizations: [] })).toEqual({ ok: true, user: { name: "alice", groups: ["system:authenticated"] } });
    expect(await a.authenticate(h, { source: "client", commonName: "bob", organizations: ["devs"] })).toEqual({ ok: true, user: { name: "bob", groups: ["devs", "system:authenticated"] } });
    expect(await a.authenticate(new Headers([["authorization", "Bearer x"]]), undefined)).toEqual({ ok: false, message: "Unauthorized" });
  });
  test("a refused certificate is a 401 with its reason, never anonymous", async () => {
    const a = new Authenticator({ requestHeader: cfg, cacheTtlMs: 10_000, clock: new FakeClock(0) });
    const refused = { source: "rejected", reason: "client certificate \"CN=x\": not verified by the client CA" } as const;
    expect(await a.authenticate(new Headers([["X-Remote-User", "alice"]]), refused)).toEqual({ ok: false, message: refused.reason });
  });
});

describe("request attributes", () => {
  const info = (m: string, p: string) => requestInfo(m, new URL(`https://h${p}`));
  test("verbs and scopes as kube-apiserver derives them", () => {
    expect(info("GET", "/apis/agents.x-k8s.io/v1beta1/namespaces/a/sandboxes")).toMatchObject({ verb: "list", namespace: "a", name: "" });
    expect(info("GET", "/apis/agents.x-k8s.io/v1beta1/sandboxes?watch=true")).toMatchObject({ verb: "watch", namespace: "" });
    expect(info("POST", "/apis/agents.x-k8s.io/v1beta1/namespaces/a/sandboxes/x/fork")).toMatchObject({ verb: "create", name: "x", subresource: "fork" });
    expect(info("DELETE", "/apis/agents.x-k8s.io/v1beta1/namespaces/a/sandboxes")).toMatchObject({ verb: "deletecollection" });
    expect(info("GET", "/metrics")).toEqual({ kind: "nonResource", verb: "get", path: "/metrics" });
  });
  test("the Forbidden message", () => {
    expect(forbiddenMessage("u", info("GET", "/apis/agents.x-k8s.io/v1beta1/namespaces/a/sandboxes/x"))).toBe(
      'sandboxes.agents.x-k8s.io "x" is forbidden: User "u" cannot get resource "sandboxes" in API group "agents.x-k8s.io" in the namespace "a"',
    );
    expect(forbiddenMessage("u", info("GET", "/apis/agents.x-k8s.io/v1beta1/sandboxes"))).toContain("at the cluster scope");
  });
});

describe("identity headers as kube-apiserver sends them (issue 22 case 5)", () => {
  const proxy: PeerCert = { source: "requestheader", commonName: "front-proxy-client", organizations: [] };
  test("one group per header line: a comma inside a line is part of the group (the TLS front escapes it)", async () => {
    const a = new Authenticator({ requestHeader: cfg, cacheTtlMs: 10_000, clock: new FakeClock(0) });
    // What the front hands over for the lines `X-Remote-Group: team,system:masters` and `X-Remote-Group: 100%`.
    const h = new Headers([["X-Remote-User", "alice"], ["X-Remote-Group", "team%2Csystem:masters"], ["X-Remote-Group", "100%25"]]);
    const r = await a.authenticate(h, proxy);
    expect(r).toEqual({ ok: true, user: { name: "alice", groups: ["team,system:masters", "100%", "system:authenticated"] } });
  });
  test("system:anonymous stays anonymous; a user already in system:unauthenticated is not made authenticated", async () => {
    const a = new Authenticator({ requestHeader: cfg, cacheTtlMs: 10_000, clock: new FakeClock(0) });
    const anon = await a.authenticate(new Headers([["X-Remote-User", "system:anonymous"], ["X-Remote-Group", "system:authenticated"], ["X-Remote-Group", "team"]]), proxy);
    expect(anon).toEqual({ ok: true, user: { name: "system:anonymous", groups: ["team", "system:unauthenticated"] } });
    const unauth = await a.authenticate(new Headers([["X-Remote-User", "bob"], ["X-Remote-Group", "system:unauthenticated"]]), proxy);
    expect(unauth).toEqual({ ok: true, user: { name: "bob", groups: ["system:unauthenticated"] } });
  });
});

describe("bearer tokens through shared/kube/reviews.ts (TokenReviewer)", () => {
  type Answer = "alice" | "reject" | "throw";
  function tokenCluster() {
    const state = { next: "alice" as Answer, reviews: 0 };
    const transport: Transport = async () => {
      state.reviews++;
      if (state.next === "throw") throw new Error("connect ECONNREFUSED 10.0.0.1:443");
      const status = state.next === "alice" ? { authenticated: true, user: { username: "alice", groups: ["devs"] } } : { authenticated: false };
      return Response.json({ kind: "TokenReview", status });
    };
    return { state, client: new KubeClient({ server: "https://kube.test" }, { transport }) };
  }
  const bearer = (t: string) => new Headers([["authorization", `Bearer ${t}`]]);

  test("a verdict is cached for --authentication-token-webhook-cache-ttl both ways; a failed review is a 401 naming it, not cached", async () => {
    const clock = new FakeClock(0);
    const { state, client } = tokenCluster();
    const a = new Authenticator({ requestHeader: cfg, tokenReviewer: client, cacheTtlMs: 10_000, clock });
    expect(await a.authenticate(bearer("t1"), undefined)).toEqual({ ok: true, user: { name: "alice", groups: ["devs", "system:authenticated"] } });
    state.next = "reject";
    expect((await a.authenticate(bearer("t1"), undefined)).ok).toBe(true);
    expect(state.reviews).toBe(1);
    expect(await a.authenticate(bearer("t2"), undefined)).toEqual({ ok: false, message: "Unauthorized" });
    state.next = "alice";
    expect(await a.authenticate(bearer("t2"), undefined)).toEqual({ ok: false, message: "Unauthorized" });
    expect(state.reviews).toBe(2);
    clock.advance(10_001);
    expect((await a.authenticate(bearer("t2"), undefined)).ok).toBe(true);
    expect(state.reviews).toBe(3);

    state.next = "throw";
    const failed = await a.authenticate(bearer("t3"), undefined);
    expect(failed).toMatchObject({ ok: false });
    expect((failed as { message: string }).message).toStartWith("token review failed:");
    state.next = "alice";
    expect((await a.authenticate(bearer("t3"), undefined)).ok).toBe(true);
    expect(state.reviews).toBe(5);
  });
});
