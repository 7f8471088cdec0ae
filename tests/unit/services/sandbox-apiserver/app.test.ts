// createApp's request path: what reaches the routes after authentication and authorization. The handler behind it
// must see the request's method, body and abort signal, and none of the headers that carried identity.
import { describe, expect, test } from "bun:test";
import { Hono } from "hono";
import pino from "pino";
import { createApp } from "#services/sandbox-apiserver/app.ts";
import { ApiserverMetrics, Authenticator, Authorizer, type PeerCert } from "#services/sandbox-apiserver/serving/index.ts";

const requestHeader = { allowedNames: ["front-proxy-client"], usernameHeaders: ["X-Remote-User"], groupHeaders: ["X-Remote-Group"], extraHeaderPrefixes: ["X-Remote-Extra-"] };
const aggregator: PeerCert = { source: "requestheader", commonName: "front-proxy-client", organizations: [] };
const PATH = "/apis/agents.x-k8s.io/v1beta1/namespaces/default/sandboxes";

function appWith(api: Hono) {
  return createApp({
    authenticator: new Authenticator({ requestHeader, cacheTtlMs: 10_000 }),
    authorizer: new Authorizer({ alwaysAllowPaths: ["/healthz"], allowedTtlMs: 10_000, deniedTtlMs: 10_000 }),
    api,
    observability: new Hono(),
    metrics: new ApiserverMetrics(),
    log: pino({ level: "silent" }),
  });
}

const identity = { "x-remote-user": "alice", "x-remote-group": "system:masters", "x-remote-extra-scopes": "s", authorization: "Bearer t" };

describe("the request the routes see", () => {
  test("method, path, query and body arrive whole; identity headers and Authorization do not", async () => {
    let seen: { method: string; url: string; body: string; headers: Record<string, string> } | undefined;
    const api = new Hono().post(PATH, async (c) => {
      seen = { method: c.req.method, url: c.req.url, body: await c.req.text(), headers: Object.fromEntries(c.req.raw.headers) };
      return c.json({}, 201);
    });
    const body = JSON.stringify({ kind: "Sandbox", metadata: { name: "ünïcode-ok" } });
    const res = await appWith(api)(
      new Request(`https://x${PATH}?fieldValidation=Strict`, { method: "POST", body, headers: { ...identity, "content-type": "application/json", accept: "application/json" } }),
      aggregator,
    );
    expect(res.status).toBe(201);
    expect(seen).toBeDefined();
    expect(seen!.method).toBe("POST");
    expect(new URL(seen!.url).search).toBe("?fieldValidation=Strict");
    expect(seen!.body).toBe(body);
    expect(seen!.headers["content-type"]).toBe("application/json");
    for (const h of Object.keys(identity)) expect(seen!.headers[h]).toBeUndefined();
  });

  test("a GET (a watch) carries the caller's abort signal to the route", async () => {
    let routeSignal: AbortSignal | undefined;
    const api = new Hono().get(PATH, (c) => {
      routeSignal = c.req.raw.signal;
      return c.json({});
    });
    const caller = new AbortController();
    await appWith(api)(new Request(`https://x${PATH}?watch=true`, { headers: identity, signal: caller.signal }), aggregator);
    expect(routeSignal?.aborted).toBe(false);
    caller.abort();
    expect(routeSignal?.aborted).toBe(true);
  });

  test("identity headers without the front proxy's certificate name nobody: anonymous is refused before any route runs", async () => {
    let ran = false;
    const api = new Hono().get(PATH, (c) => {
      ran = true;
      return c.json({});
    });
    const res = await appWith(api)(new Request(`https://x${PATH}`, { headers: { "x-remote-user": "alice", "x-remote-group": "system:masters" } }), undefined);
    expect(res.status).toBe(403);
    expect(ran).toBe(false);
  });
});

describe("errors before and around authentication are Statuses (issue 22 case 5)", () => {
  test("a bad % escape in the path is a 400 Status, answered before authentication, with no route run", async () => {
    let ran = false;
    const api = new Hono().all("*", (c) => {
      ran = true;
      return c.json({});
    });
    const res = await appWith(api)(new Request("https://x/apis/agents.x-k8s.io/v1beta1/namespaces/%zz/sandboxes"), undefined);
    expect(res.status).toBe(400);
    const body = (await res.json()) as { kind: string; reason: string; message: string };
    expect(body).toMatchObject({ kind: "Status", reason: "BadRequest" });
    expect(body.message).toContain('invalid escape in segment "%zz"');
    expect(ran).toBe(false);
  });

  test("a body over the cap is a 413 Status, declared or chunked, and never reaches the route", async () => {
    let ran = false;
    const api = new Hono().post(PATH, (c) => {
      ran = true;
      return c.json({}, 201);
    });
    const app = createApp({
      authenticator: new Authenticator({ requestHeader, cacheTtlMs: 10_000 }),
      authorizer: new Authorizer({ alwaysAllowPaths: [], allowedTtlMs: 10_000, deniedTtlMs: 10_000 }),
      api,
      observability: new Hono(),
      metrics: new ApiserverMetrics(),
      log: pino({ level: "silent" }),
      maxBodyBytes: 1000,
    });
    const declared = await app(new Request(`https://x${PATH}`, { method: "POST", headers: identity, body: "x".repeat(1001) }), aggregator);
    expect(declared.status).toBe(413);
    expect(await declared.json()).toMatchObject({ kind: "Status", reason: "RequestEntityTooLarge", code: 413 });
    // No Content-Length: the body is counted as it arrives.
    const chunks = [new Uint8Array(600), new Uint8Array(600)];
    const stream = new ReadableStream<Uint8Array>({ pull: (c) => (chunks.length ? c.enqueue(chunks.shift()!) : c.close()) });
    const chunked = await app(new Request(`https://x${PATH}`, { method: "POST", headers: identity, body: stream }), aggregator);
    expect(chunked.status).toBe(413);
    expect(ran).toBe(false);
    const fits = await app(new Request(`https://x${PATH}`, { method: "POST", headers: identity, body: "x".repeat(1000) }), aggregator);
    expect(fits.status).toBe(201);
  });

  test("a path that only starts like a probe is authorized like any other (anonymous: 403), not served as the probe", async () => {
    const observability = new Hono().get("*", (c) => c.text("ok"));
    const app = createApp({
      authenticator: new Authenticator({ requestHeader, cacheTtlMs: 10_000 }),
      authorizer: new Authorizer({ alwaysAllowPaths: ["/healthz", "/livez"], allowedTtlMs: 10_000, deniedTtlMs: 10_000 }),
      api: new Hono().all("*", (c) => c.json({ leaked: true })),
      observability,
      metrics: new ApiserverMetrics(),
      log: pino({ level: "silent" }),
    });
    expect((await app(new Request("https://x/healthz"), undefined)).status).toBe(200);
    for (const p of ["/healthzfoo", "/livez/../apis/agents.x-k8s.io/v1beta1/namespaces/b/sandboxes", "/livez/x"]) {
      const res = await app(new Request(`https://x${p}`), undefined);
      expect(res.status).toBe(403);
      expect(await res.json()).toMatchObject({ kind: "Status", reason: "Forbidden" });
    }
  });
});
