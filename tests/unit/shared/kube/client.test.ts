// The client's request shaping, auth, limits and error mapping, through an injected transport (no socket).
// TLS, certificates and the real wire are proven against a real kube-apiserver in tests/integration/shared/kube/.
import { describe, expect, test, afterAll } from "bun:test";
import pino from "pino";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FakeClock } from "#shared/clock/index.ts";
import { KubeClient, MAX_429_RETRIES } from "#shared/kube/client.ts";
import { isConflict, isNotFound, KubeApiError } from "#shared/kube/errors.ts";
import { TokenBucket } from "#shared/kube/rate-limit.ts";
import { Leases, Nodes, Pods } from "#shared/kube/resources.ts";
import type { Transport, TransportInit } from "#shared/kube/transport.ts";
import { BearerToken } from "#shared/kube/transport.ts";

type Seen = { url: string; init: TransportInit };
function recorder(respond: (s: Seen) => Response | Promise<Response> = () => Response.json({})) {
  const seen: Seen[] = [];
  const transport: Transport = async (url, init) => {
    const s = { url, init };
    seen.push(s);
    return respond(s);
  };
  return { seen, transport };
}
const server = "https://k8s.test:6443";
/** The error a call failed with; a call that succeeds fails the test. */
const failure = (p: Promise<unknown>) =>
  p.then(
    () => {
      throw new Error("expected the call to fail");
    },
    (e) => e as KubeApiError & { cause: Error },
  );

describe("requests", () => {
  test("get, list, create, update, delete hit the right paths with the right verbs", async () => {
    const r = recorder((s) => Response.json(s.init.method === "GET" && s.url.includes("/pods?") ? { items: [], metadata: { resourceVersion: "7" } } : {}));
    const c = new KubeClient({ server: server + "/", namespace: "def" }, { transport: r.transport });
    await c.get(Pods, "p1");
    await c.get(Nodes, "n1", { resourceVersion: "0" });
    const l = await c.list(Pods, { namespace: "a", labelSelector: "x=y", fieldSelector: "spec.nodeName=n1", limit: 10 });
    expect(l).toEqual({ items: [], metadata: { resourceVersion: "7" } });
    await c.create(Pods, { metadata: { name: "p", namespace: "b" } });
    await c.create(Pods, { apiVersion: "policy/v1", kind: "Eviction", metadata: { name: "p", namespace: "b" } }, { subresource: "eviction" });
    await c.update(Pods, { metadata: { name: "p", namespace: "b" } }, { subresource: "status" });
    await c.delete(Leases, "l", { namespace: "kube-node-lease" });
    await c.delete(Pods, "p", { namespace: "b", gracePeriodSeconds: 0, preconditions: { uid: "u1" } });
    expect(r.seen.map((s) => `${s.init.method} ${s.url.slice(server.length)}`)).toEqual([
      "GET /api/v1/namespaces/def/pods/p1",
      "GET /api/v1/nodes/n1?resourceVersion=0",
      "GET /api/v1/namespaces/a/pods?fieldSelector=spec.nodeName%3Dn1&labelSelector=x%3Dy&limit=10",
      "POST /api/v1/namespaces/b/pods",
      "POST /api/v1/namespaces/b/pods/p/eviction",
      "PUT /api/v1/namespaces/b/pods/p/status",
      "DELETE /apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/l",
      "DELETE /api/v1/namespaces/b/pods/p",
    ]);
    expect(r.seen[6]!.init.body).toBeUndefined();
    expect(JSON.parse(r.seen[7]!.init.body!)).toEqual({ apiVersion: "v1", kind: "DeleteOptions", gracePeriodSeconds: 0, preconditions: { uid: "u1" } });
    expect(c.requestCount()).toBe(8);
  });

  test("patch types map to their content types; apply carries fieldManager and force", async () => {
    const r = recorder();
    const c = new KubeClient({ server }, { transport: r.transport });
    await c.patch(Pods, "p", { metadata: { labels: { a: "b" } } }, { namespace: "n", type: "merge" });
    await c.patch(Pods, "p", {}, { namespace: "n", type: "strategic", subresource: "status" });
    await c.patch(Pods, "p", [{ op: "remove", path: "/x" }], { namespace: "n", type: "json" });
    await c.apply(Pods, { apiVersion: "v1", kind: "Pod", metadata: { name: "p", namespace: "n" } }, { fieldManager: "me", force: true });
    expect(r.seen.map((s) => [s.url.slice(server.length), s.init.headers["Content-Type"]])).toEqual([
      ["/api/v1/namespaces/n/pods/p", "application/merge-patch+json"],
      ["/api/v1/namespaces/n/pods/p/status", "application/strategic-merge-patch+json"],
      ["/api/v1/namespaces/n/pods/p", "application/json-patch+json"],
      ["/api/v1/namespaces/n/pods/p?fieldManager=me&force=true", "application/apply-patch+yaml"],
    ]);
    expect(() => c.patch(Pods, "p", {}, { namespace: "n", type: "apply" })).toThrow(/fieldManager/);
  });

  test("a namespaced call without any namespace is refused before a request is made", () => {
    const r = recorder();
    const c = new KubeClient({ server }, { transport: r.transport });
    expect(() => c.get(Pods, "p")).toThrow(/namespace is required/);
    expect(r.seen.length).toBe(0);
  });
});

describe("errors", () => {
  test("a Status body becomes a classified KubeApiError with verb and path", async () => {
    const c = new KubeClient(
      { server },
      {
        transport: recorder(() =>
          Response.json({ kind: "Status", code: 404, reason: "NotFound", message: 'pods "p" not found', details: { name: "p", kind: "pods" } }, { status: 404 }),
        ).transport,
      },
    );
    const e = await failure(c.get(Pods, "p", { namespace: "n" }));
    expect(isNotFound(e)).toBe(true);
    expect(e).toMatchObject({ status: 404, verb: "get", path: "/api/v1/namespaces/n/pods/p", details: { name: "p", kind: "pods" } });
    const c2 = new KubeClient({ server }, { transport: recorder(() => new Response("conflict!", { status: 409 })).transport });
    const e2 = await failure(c2.update(Pods, { metadata: { name: "p", namespace: "n" } }));
    expect(isConflict(e2)).toBe(true);
    expect(e2.verb).toBe("update");
  });

  test("no answer within the timeout is a Timeout error (status 0); the caller's own abort is passed through", async () => {
    // Like fetch: an already-aborted signal rejects at once, a later abort rejects then.
    const hang: Transport = (_u, init) =>
      new Promise((_, reject) => {
        if (init.signal?.aborted) return reject(init.signal.reason);
        init.signal?.addEventListener("abort", () => reject(init.signal!.reason));
      });
    const c = new KubeClient({ server }, { transport: hang, timeoutMs: 50 });
    const e = await failure(c.get(Nodes, "n"));
    expect(e).toBeInstanceOf(KubeApiError);
    expect([e.status, e.reason]).toEqual([0, "Timeout"]);
    const ac = new AbortController();
    const p = c.request("GET", "/x", { signal: ac.signal, timeoutMs: 10_000 });
    ac.abort(new Error("mine"));
    await expect(p).rejects.toThrow("mine");
  });

  test("a 429 with Retry-After is retried after the wait; without Retry-After, or past the retry cap, it fails", async () => {
    let n = 0;
    const throttled = () => Response.json({ kind: "Status", code: 429, reason: "TooManyRequests" }, { status: 429, headers: { "Retry-After": "0" } });
    const c = new KubeClient({ server }, { transport: recorder(() => (++n <= 2 ? throttled() : Response.json({ ok: 1 }))).transport });
    expect(await c.get(Nodes, "n")).toEqual({ ok: 1 });
    expect(c.requestCount()).toBe(3);
    const always = new KubeClient({ server }, { transport: recorder(throttled).transport });
    expect((await failure(always.get(Nodes, "n"))).status).toBe(429);
    expect(always.requestCount()).toBe(1 + MAX_429_RETRIES);
    const noHeader = new KubeClient({ server }, { transport: recorder(() => Response.json({}, { status: 429 })).transport });
    expect((await failure(noHeader.get(Nodes, "n"))).reason).toBe("TooManyRequests");
    expect(noHeader.requestCount()).toBe(1);
  });

  test("a refused connection is a TransportError carrying the cause", async () => {
    const c = new KubeClient({ server }, { transport: () => Promise.reject(new Error("ECONNREFUSED")) });
    const e = await failure(c.get(Nodes, "n"));
    expect([e.status, e.reason, e.cause.message]).toEqual([0, "TransportError", "ECONNREFUSED"]);
  });
});

describe("auth", () => {
  const dir = mkdtempSync(join(tmpdir(), "kubetok-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  test("a static token is sent as a bearer token; no token, no header", async () => {
    const r = recorder();
    await new KubeClient({ server, token: "abc" }, { transport: r.transport }).get(Nodes, "n");
    await new KubeClient({ server }, { transport: r.transport }).get(Nodes, "n");
    expect(r.seen[0]!.init.headers.Authorization).toBe("Bearer abc");
    expect(r.seen[1]!.init.headers.Authorization).toBeUndefined();
  });

  test("a token file is re-read after the reload interval, so a rotated projected token is picked up", async () => {
    const f = join(dir, "token");
    writeFileSync(f, "one\n");
    let t = 0;
    const tok = new BearerToken({ token: "static-loses", tokenFile: f }, 60_000, { monotonic: () => t });
    expect(await tok.get()).toBe("one");
    writeFileSync(f, "two\n");
    t = 59_000;
    expect(await tok.get()).toBe("one");
    t = 60_001;
    expect(await tok.get()).toBe("two");
    writeFileSync(f, "three\n");
    tok.invalidate(); // what the client does on a 401
    expect(await tok.get()).toBe("three");
    rmSync(f);
    t = 200_000;
    expect(await tok.get()).toBe("three"); // a failed re-read keeps the last good token
  });
});

test("requests arriving together at the reload moment share one token file read", async () => {
  const dir = mkdtempSync(join(tmpdir(), "kubetokburst-"));
  const errors: unknown[] = [];
  // The file is missing: every read fails and reports, so the report count is the read count.
  const tok = new BearerToken({ token: "kept", tokenFile: join(dir, "absent") }, 60_000, { monotonic: () => 0 }, (e) => void errors.push(e));
  expect(await Promise.all([tok.get(), tok.get(), tok.get(), tok.get(), tok.get()])).toEqual(["kept", "kept", "kept", "kept", "kept"]);
  expect(errors).toHaveLength(1);
  rmSync(dir, { recursive: true, force: true });
});

test("a 401 makes the next request re-read the token file at once", async () => {
  const dir = mkdtempSync(join(tmpdir(), "kubetok401-"));
  const f = join(dir, "token");
  writeFileSync(f, "old");
  const r = recorder((s) => (s.init.headers.Authorization === "Bearer new" ? Response.json({}) : Response.json({}, { status: 401 })));
  const c = new KubeClient({ server, tokenFile: f }, { transport: r.transport });
  expect((await failure(c.get(Nodes, "n"))).status).toBe(401);
  writeFileSync(f, "new");
  await c.get(Nodes, "n");
  expect(r.seen.map((s) => s.init.headers.Authorization)).toEqual(["Bearer old", "Bearer new"]);
  rmSync(dir, { recursive: true, force: true });
});

test("debug logs name verb, path and status, never the bearer token", async () => {
  const lines: string[] = [];
  const log = pino({ level: "debug" }, { write: (l: string) => void lines.push(l) });
  const secret = "s3cr3t-token-value";
  const c = new KubeClient({ server, token: secret }, { transport: recorder(() => Response.json({}, { status: 403 })).transport, log });
  await failure(c.get(Nodes, "n"));
  expect(lines.length).toBeGreaterThan(0);
  expect(lines.join("\n")).toContain("/api/v1/nodes/n");
  expect(lines.join("\n")).not.toContain(secret);
});

test("every request, watches included, waits for the limiter", async () => {
  const clock = new FakeClock(0);
  const bucket = new TokenBucket(10, 2, clock);
  const r = recorder((s) => (s.url.includes("watch=1") ? new Response("") : Response.json({})));
  const c = new KubeClient({ server }, { transport: r.transport, limiter: bucket });
  await c.get(Nodes, "a");
  const ac = new AbortController();
  for await (const _ of c.watch(Nodes, { resourceVersion: "1", signal: ac.signal })) {
  }
  const third = c.get(Nodes, "c");
  await Bun.sleep(5);
  expect(r.seen.length).toBe(2);
  clock.advance(100);
  await third;
  expect(r.seen.length).toBe(3);
});

test("issue 13: with a token in the bucket and a fresh bearer token, a request reaches the transport in the caller's own turn", async () => {
  const clock = new FakeClock(0);
  const r = recorder();
  const c = new KubeClient({ server, token: "t" }, { transport: r.transport, limiter: new TokenBucket(10, 1, clock) });
  const first = c.update(Pods, { metadata: { name: "p", namespace: "n" } }, { subresource: "status" });
  // No await yet: the PUT already left, ahead of whatever the caller does next in this turn.
  expect(r.seen.map((x) => x.init.method)).toEqual(["PUT"]);
  await first;
  // The bucket is empty now: the next request waits for its token, so it does not leave in this turn.
  const second = c.get(Nodes, "n");
  expect(r.seen).toHaveLength(1);
  clock.advance(100);
  await second;
  expect(r.seen).toHaveLength(2);
});

test("watch builds the query and yields events from the stream", async () => {
  const body = [
    { type: "ADDED", object: { metadata: { name: "a", resourceVersion: "5" } } },
    { type: "BOOKMARK", object: { metadata: { resourceVersion: "9" } } },
  ]
    .map((e) => JSON.stringify(e) + "\n")
    .join("");
  const r = recorder(() => new Response(body));
  const c = new KubeClient({ server }, { transport: r.transport });
  const evs = [];
  for await (const ev of c.watch(Pods, { namespace: "n", resourceVersion: "4", allowWatchBookmarks: true, timeoutSeconds: 30, labelSelector: "a=b", signal: new AbortController().signal })) evs.push(ev.type);
  expect(evs).toEqual(["ADDED", "BOOKMARK"]);
  expect(r.seen[0]!.url.slice(server.length)).toBe("/api/v1/namespaces/n/pods?watch=1&resourceVersion=4&labelSelector=a%3Db&allowWatchBookmarks=true&timeoutSeconds=30");
  expect(r.seen[0]!.init.idleTimeoutMs).toBeGreaterThanOrEqual(90_000);
});

test("a watch request answered 410 throws a Gone error", async () => {
  const c = new KubeClient({ server }, { transport: recorder(() => Response.json({ kind: "Status", code: 410, reason: "Expired" }, { status: 410 })).transport });
  const it = c.watch(Pods, { namespace: "n", resourceVersion: "1", signal: new AbortController().signal });
  const e = await failure(it.next());
  expect([e.status, e.reason, e.verb]).toEqual([410, "Expired", "watch"]);
});
