// api.{domain} relayed to the e2b REST surface (shared/relay/api-host.ts): which hosts count, and what the relay
// to --e2b-api-upstream passes on (method, path, query, body, the API key, X-Forwarded-*), drops (hop-by-hop
// headers) and leaves alone (a compressed reply stays compressed), and an unreachable upstream's 502 envelope.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { gzipSync } from "node:zlib";
import { isApiHost, upstreamApi } from "#shared/relay/index.ts";
import { freePort } from "#tests/e2e/stack/run-stack.ts";

let seen: { method: string; url: string; headers: Record<string, string>; body: string } | undefined;
let upstream: ReturnType<typeof Bun.serve>;
beforeAll(() => {
  upstream = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      const headers: Record<string, string> = {};
      req.headers.forEach((v, k) => (headers[k] = v));
      seen = { method: req.method, url: req.url, headers, body: await req.text() };
      if (new URL(req.url).pathname === "/gz") return new Response(gzipSync("zipped"), { headers: { "content-encoding": "gzip", "content-type": "text/plain" } });
      return Response.json({ ok: true }, { status: 201, headers: { "x-upstream": "1" } });
    },
  });
});
afterAll(() => upstream.stop(true));

test("only api.{domain} itself, any case, with or without a port", () => {
  expect(isApiHost("api.sandbox.test", "sandbox.test")).toBe(true);
  expect(isApiHost("API.Sandbox.Test:443", "sandbox.test")).toBe(true);
  expect(isApiHost("49983-sb-1.sandbox.test", "sandbox.test")).toBe(false);
  expect(isApiHost("x.api.sandbox.test", "sandbox.test")).toBe(false);
  expect(isApiHost("api.sandbox.test.evil", "sandbox.test")).toBe(false);
  expect(isApiHost("api.", "")).toBe(false);
  // The domain's normal form is kept between calls: another domain (two proxies in one process) is not misread.
  expect(isApiHost("api.other.test", "Other.Test.")).toBe(true);
  expect(isApiHost("api.sandbox.test", "other.test")).toBe(false);
  expect(isApiHost("api.sandbox.test", "sandbox.test")).toBe(true);
});

test("method, path, query, body and the API key reach the upstream; hop-by-hop headers do not; X-Forwarded-* are added", async () => {
  const relay = upstreamApi(`http://127.0.0.1:${upstream.port}/`, () => undefined);
  const req = new Request("https://api.sandbox.test/v2/sandboxes?x=1", {
    method: "POST",
    headers: { host: "api.sandbox.test", "x-api-key": "e2b_key", "content-type": "application/json", connection: "keep-alive, x-drop", "x-drop": "1", "proxy-authorization": "p" },
    body: JSON.stringify({ templateID: "base" }),
  });
  const res = await relay(req, "10.1.2.3");
  expect(res.status).toBe(201);
  expect(res.headers.get("x-upstream")).toBe("1");
  expect(await res.json()).toEqual({ ok: true });
  expect(seen!.method).toBe("POST");
  expect(new URL(seen!.url).pathname + new URL(seen!.url).search).toBe("/v2/sandboxes?x=1");
  expect(seen!.body).toBe('{"templateID":"base"}');
  expect(seen!.headers["x-api-key"]).toBe("e2b_key");
  expect(seen!.headers["x-drop"]).toBeUndefined();
  expect(seen!.headers["proxy-authorization"]).toBeUndefined();
  expect(seen!.headers["x-forwarded-for"]).toBe("10.1.2.3");
  expect(seen!.headers["x-forwarded-host"]).toBe("api.sandbox.test");
  expect(seen!.headers["x-forwarded-proto"]).toBe("https");
});

test("a compressed reply is passed on as sent, never decoded here", async () => {
  const relay = upstreamApi(`http://127.0.0.1:${upstream.port}`, () => undefined);
  const res = await relay(new Request("https://api.sandbox.test/gz", { headers: { "accept-encoding": "gzip" } }), undefined);
  expect(res.headers.get("content-encoding")).toBe("gzip");
  const raw = new Uint8Array(await res.arrayBuffer());
  expect(Buffer.from(Bun.gunzipSync(raw)).toString()).toBe("zipped");
});

test("an unreachable upstream is a 502 envelope, and the operator's log hook hears why", async () => {
  const errors: unknown[] = [];
  const relay = upstreamApi(`http://127.0.0.1:${await freePort()}`, (e) => void errors.push(e));
  const res = await relay(new Request("https://api.sandbox.test/sandboxes"), undefined);
  expect(res.status).toBe(502);
  expect(await res.json()).toEqual({ code: 502, message: "the e2b API upstream is unreachable" });
  expect(errors).toHaveLength(1);
});
