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
