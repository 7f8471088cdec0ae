// The kubelet API's authentication, authorization mapping and guard, with fake reviewers: which credential wins,
// which SubjectAccessReview a request needs (the kubelet's path → subresource table), what 401 and 403 say, and that
// nothing reaches a route before both pass. The real-cluster side is tests/integration/vk-sandbox/kubelet-api-auth.
import { describe, expect, test } from "bun:test";
import type { AccessAttributes, ReviewedUser, TokenVerdict } from "#shared/kube/index.ts";
import {
  bearerToken,
  guardKubeletApi,
  KubeletAuthenticator,
  KubeletAuthorizer,
  kubeletAttributes,
  kubeletBindHost,
  type PeerCert,
} from "#services/vk-sandbox/kubelet-api/index.ts";

const SA: ReviewedUser = { name: "system:serviceaccount:ns:sa", groups: ["system:serviceaccounts", "system:authenticated"] };

function tokens(verdicts: Record<string, TokenVerdict>) {
  const seen: string[] = [];
  return {
    seen,
    async review(token: string): Promise<TokenVerdict> {
      seen.push(token);
      return verdicts[token] ?? { ok: false, reason: "the cluster did not authenticate the token" };
    },
  };
}

const headers = (auth?: string) => new Headers(auth ? { Authorization: auth } : {});
const certOf = (commonName: string, organizations: string[] = []): PeerCert => ({ verified: true, commonName, organizations });

describe("kubelet API authentication", () => {
  test("a verified client certificate is CN as the user and O as the groups, plus system:authenticated", async () => {
    const a = new KubeletAuthenticator(tokens({}));
    expect(await a.authenticate(headers(), certOf("kube-apiserver-kubelet-client", ["system:masters"]))).toEqual({
      ok: true,
      via: "client-certificate",
      user: { name: "kube-apiserver-kubelet-client", groups: ["system:masters", "system:authenticated"] },
    });
  });

  test("a bearer token is reviewed; the user the cluster names is the caller", async () => {
    const t = tokens({ good: { ok: true, user: SA } });
    const a = new KubeletAuthenticator(t);
    expect(await a.authenticate(headers("Bearer good"), undefined)).toEqual({ ok: true, via: "token", user: SA });
    expect(await a.authenticate(headers("bearer good"), undefined)).toMatchObject({ ok: true }); // any letter case
    expect(t.seen).toEqual(["good", "good"]);
  });

  test("no credential, a non-bearer Authorization, or an empty token is 401 without a review", async () => {
    const t = tokens({});
    const a = new KubeletAuthenticator(t);
    for (const h of [headers(), headers("Basic dXNlcjpwYXNz"), headers("Bearer "), headers("Bearer a b")]) {
      expect(await a.authenticate(h, undefined)).toEqual({ ok: false, reason: "no credentials", public: "present a bearer token or a client certificate" });
    }
    expect(t.seen).toEqual([]);
  });

  test("a rejected token is 401; a review that could not be made says to try again, without its internals", async () => {
    const a = new KubeletAuthenticator(
      tokens({ down: { ok: false, error: true, reason: "token review failed: connect ECONNREFUSED 10.96.0.1:443" } }),
    );
    expect(await a.authenticate(headers("Bearer nope"), undefined)).toMatchObject({ ok: false, public: "the token was not accepted" });
    const down = await a.authenticate(headers("Bearer down"), undefined);
    expect(down).toMatchObject({ ok: false, public: "the token could not be reviewed; try again" });
    expect(down.ok === false && down.public).not.toContain("10.96.0.1");
  });

  test("a certificate the client CA does not verify is 401, unless a valid token comes with it", async () => {
    const a = new KubeletAuthenticator(tokens({ good: { ok: true, user: SA } }));
    const bad: PeerCert = { verified: false, reason: "UNABLE_TO_VERIFY_LEAF_SIGNATURE" };
    expect(await a.authenticate(headers(), bad)).toMatchObject({ ok: false, public: "the client certificate was not accepted" });
    expect(await a.authenticate(headers("Bearer good"), bad)).toMatchObject({ ok: true, via: "token" });
  });

  test("a verified certificate with an empty CN names no user: 401", async () => {
    const a = new KubeletAuthenticator(tokens({}));
    expect(await a.authenticate(headers(), certOf(""))).toMatchObject({ ok: false, public: "the client certificate names no user" });
  });

  test("without a token reviewer, bearer tokens are refused", async () => {
    const a = new KubeletAuthenticator(undefined);
    expect(await a.authenticate(headers("Bearer x"), undefined)).toMatchObject({ ok: false, public: "bearer tokens are not accepted" });
  });

  test("bearerToken reads kube's form only", () => {
    expect(bearerToken(headers("Bearer abc"))).toBe("abc");
    expect(bearerToken(headers("BEARER  abc  "))).toBe("abc");
    expect(bearerToken(headers("Token abc"))).toBeUndefined();
  });
});

describe("kubelet API authorization attributes (the kubelet's path table)", () => {
  const cases: [method: string, path: string, verb: string, subresource: string][] = [
    ["GET", "/pods", "get", "proxy"],
    ["GET", "/runningpods/", "get", "proxy"],
    ["GET", "/containerLogs/ns/p/c", "get", "proxy"],
    ["POST", "/exec/ns/p/c", "create", "proxy"],
    ["GET", "/attach/ns/p/c", "get", "proxy"],
    ["POST", "/portForward/ns/p", "create", "proxy"],
    ["GET", "/stats/summary", "get", "stats"],
    ["GET", "/stats", "get", "stats"],
    ["GET", "/metrics", "get", "metrics"],
    ["GET", "/metrics/resource", "get", "metrics"],
    ["GET", "/metricsfoo", "get", "proxy"],
    ["GET", "/logs/syslog", "get", "log"],
    ["GET", "/spec/", "get", "spec"],
    ["HEAD", "/pods", "get", "proxy"],
    ["PUT", "/pods", "update", "proxy"],
    ["PATCH", "/pods", "patch", "proxy"],
    ["DELETE", "/pods", "delete", "proxy"],
    ["OPTIONS", "/pods", "options", "proxy"],
    ["GET", "/nope", "get", "proxy"],
  ];
  for (const [method, path, verb, subresource] of cases) {
    test(`${method} ${path} needs ${verb} nodes/${subresource} on this node`, () => {
      expect(kubeletAttributes(method, path, "node-a")).toEqual({ verb, group: "", version: "v1", resource: "nodes", subresource, name: "node-a" });
    });
  }

  test("the authorizer asks for exactly those resource attributes", async () => {
    const asked: AccessAttributes[] = [];
    const z = new KubeletAuthorizer({ review: async (_u, a) => (asked.push(a), { allowed: true }) }, "node-a");
    const d = await z.authorize(SA, "GET", "/stats/summary");
    expect(d.allowed).toBe(true);
    expect(asked).toEqual([{ resourceAttributes: { verb: "get", group: "", version: "v1", resource: "nodes", subresource: "stats", name: "node-a" } }]);
  });
});

describe("kubelet API guard", () => {
  function guard(opts: { allowed: boolean; error?: boolean }) {
    const reached: string[] = [];
    const handler = guardKubeletApi({
      authenticator: new KubeletAuthenticator(tokens({ good: { ok: true, user: SA } })),
      authorizer: new KubeletAuthorizer({ review: async () => ({ allowed: opts.allowed, ...(opts.error ? { error: true, reason: "authorization review failed: boom" } : {}) }) }, "node-a"),
      fetch: (req) => (reached.push(new URL(req.url).pathname), new Response("routed")),
      log: { debug() {}, info() {}, warn() {}, error() {} },
    });
    return { handler, reached };
  }
  const req = (path: string, auth?: string) => new Request(`https://kubelet.invalid${path}`, { headers: auth ? { Authorization: auth } : {} });

  test("unauthenticated: 401 plain text, the route is never reached", async () => {
    const g = guard({ allowed: true });
    const r = await g.handler(req("/pods"), undefined);
    expect(r.status).toBe(401);
    expect(r.headers.get("content-type")).toBe("text/plain; charset=utf-8");
    expect(await r.text()).toBe("Unauthorized: present a bearer token or a client certificate\n");
    expect(g.reached).toEqual([]);
  });

  test("authenticated but denied: 403 naming the user, verb and subresource; not routed", async () => {
    const g = guard({ allowed: false });
    const r = await g.handler(req("/metrics", "Bearer good"), undefined);
    expect(r.status).toBe(403);
    expect(await r.text()).toBe("Forbidden (user=system:serviceaccount:ns:sa, verb=get, resource=nodes, subresource=metrics)\n");
    expect(g.reached).toEqual([]);
  });

  test("a review that failed is a 403 that says to try again", async () => {
    const g = guard({ allowed: false, error: true });
    const r = await g.handler(req("/pods", "Bearer good"), undefined);
    expect(r.status).toBe(403);
    expect(await r.text()).toContain("the authorization review could not be made; try again");
  });

  test("authenticated and allowed: the route answers", async () => {
    const g = guard({ allowed: true });
    const r = await g.handler(req("/pods", "Bearer good"), undefined);
    expect(await r.text()).toBe("routed");
    expect(g.reached).toEqual(["/pods"]);
  });
});

describe("kubelet API guard logs", () => {
  test("a refused token, a denial and a failed review are logged by level, and no line holds the token", async () => {
    const lines: { level: string; obj: object; msg: string }[] = [];
    const rec = (level: string) => (obj: object, msg: string) => void lines.push({ level, obj, msg });
    const handler = guardKubeletApi({
      authenticator: new KubeletAuthenticator(
        tokens({
          "secret-token-allowed": { ok: true, user: SA },
          "secret-token-down": { ok: false, error: true, reason: "token review failed: 503" },
        }),
      ),
      authorizer: new KubeletAuthorizer({ review: async () => ({ allowed: false, reason: "no RBAC policy matched" }) }, "node-a"),
      fetch: () => new Response("routed"),
      log: { debug: rec("debug"), info: rec("info"), warn: rec("warn"), error: rec("error") },
    });
    for (const t of ["secret-token-rejected", "secret-token-down", "secret-token-allowed"]) {
      await handler(new Request("https://kubelet.invalid/pods", { headers: { Authorization: `Bearer ${t}` } }), undefined);
    }
    expect(lines.map((l) => l.level)).toEqual(["debug", "warn", "info"]);
    expect(JSON.stringify(lines)).not.toContain("secret-token");
    expect(lines[2]!.obj).toMatchObject({ user: SA.name, verb: "get", subresource: "proxy", reason: "no RBAC policy matched" });
  });
});

describe("kubelet API bind address", () => {
  test("the host of --listen-addr wins; else --node-ip; else every interface", () => {
    expect(kubeletBindHost("127.0.0.1:10260", "10.0.0.5")).toBe("127.0.0.1");
    expect(kubeletBindHost(":10260", "10.0.0.5")).toBe("10.0.0.5");
    expect(kubeletBindHost(":10260", undefined)).toBe("0.0.0.0");
    expect(kubeletBindHost("[::1]:10260", "10.0.0.5")).toBe("::1");
  });
});
