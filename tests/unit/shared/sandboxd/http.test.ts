// shared/sandboxd/http.ts: the bounded exchange, status mapping, decoding and the retry loop, against tiny
// Bun.serve stubs (the transport is below the simulator's level: oversize bodies, bare sockets, headers).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createServer, type Server as NetServer } from "node:net";
import { z } from "zod";
import {
  SandboxdBadRequest,
  SandboxdCapacity,
  SandboxdConflict,
  SandboxdForbidden,
  SandboxdNotFound,
  SandboxdProtocol,
  SandboxdRouteNotFound,
  SandboxdServerError,
  SandboxdTransport,
  SandboxdUnauthorized,
  SandboxdUnexpectedStatus,
} from "#shared/sandboxd/errors.ts";
import {
  MAX_ERROR_BYTES,
  decodeJson,
  errorText,
  exchange,
  parseRetryAfter,
  readCapped,
  retryableForSafeCall,
  statusError,
  withRetries,
  type RawReply,
} from "#shared/sandboxd/http.ts";

const ctx = { node: "stub", route: "GET /x" };
let seenAuth: (string | null)[] = [];
let server: ReturnType<typeof Bun.serve>;
let base: string;

beforeAll(() => {
  server = Bun.serve({
    port: 0,
    async fetch(req) {
      const u = new URL(req.url);
      seenAuth.push(req.headers.get("authorization"));
      switch (u.pathname) {
        case "/ok":
          return Response.json({ a: 1 });
        case "/big": {
          const n = Number(u.searchParams.get("n"));
          return new Response(new Uint8Array(n).fill(0x20));
        }
        case "/stream-big": {
          // No Content-Length: the reader must stop one byte past the cap by itself.
          const n = Number(u.searchParams.get("n"));
          let sent = 0;
          return new Response(
            new ReadableStream({
              pull(c) {
                if (sent >= n) return c.close();
                const chunk = Math.min(65536, n - sent);
                sent += chunk;
                c.enqueue(new Uint8Array(chunk).fill(0x20));
              },
            }),
          );
        }
        case "/slow":
          await Bun.sleep(2000);
          return Response.json({});
        case "/echo":
          return Response.json({ method: req.method, ct: req.headers.get("content-type"), body: await req.text() });
      }
      return new Response("404 page not found\n", { status: 404 });
    },
  });
  base = `http://127.0.0.1:${server.port}`;
});
afterAll(() => server.stop(true));

function reply(status: number, body: string, headers: Record<string, string> = {}): RawReply {
  return { status, headers: new Headers(headers), body: new TextEncoder().encode(body) };
}

describe("exchange", () => {
  test("sends the bearer when a token is set and no Authorization header at all when it is empty", async () => {
    seenAuth = [];
    await exchange({ fetch, url: `${base}/ok`, method: "GET", token: "root-tok", timeoutMs: 2000, ctx });
    await exchange({ fetch, url: `${base}/ok`, method: "GET", token: "", timeoutMs: 2000, ctx });
    expect(seenAuth).toEqual(["Bearer root-tok", null]);
  });

  test("a JSON body goes out with a JSON content type", async () => {
    const r = await exchange({ fetch, url: `${base}/echo`, method: "POST", token: "", body: '{"x":1}', timeoutMs: 2000, ctx });
    expect(JSON.parse(new TextDecoder().decode(r.body))).toEqual({ method: "POST", ct: "application/json", body: '{"x":1}' });
  });

  test("a reply over the cap is refused as oversize, declared length or streamed", async () => {
    for (const path of ["/big", "/stream-big"]) {
      const err = await exchange({ fetch, url: `${base}${path}?n=1025`, method: "GET", token: "", timeoutMs: 5000, ctx, maxReplyBytes: 1024 }).catch((e) => e);
      expect(err).toBeInstanceOf(SandboxdProtocol);
      expect((err as SandboxdProtocol).problem).toBe("oversize");
    }
  });

  test("a reply exactly at the cap is read whole", async () => {
    const r = await exchange({ fetch, url: `${base}/stream-big?n=1024`, method: "GET", token: "", timeoutMs: 5000, ctx, maxReplyBytes: 1024 });
    expect(r.body.byteLength).toBe(1024);
  });

  test("an error body is read only up to 64 KiB", async () => {
    // A 200 here, so we read it as "error" by calling readCapped directly with the error cap.
    const res = await fetch(`${base}/stream-big?n=${MAX_ERROR_BYTES * 3}`);
    const { bytes, over } = await readCapped(res, MAX_ERROR_BYTES);
    expect(over).toBe(true);
    expect(bytes.byteLength).toBe(MAX_ERROR_BYTES);
  });

  test("connection refused is provably undelivered", async () => {
    const probe = Bun.serve({ port: 0, fetch: () => new Response("") });
    const port = probe.port;
    probe.stop(true);
    const err = await exchange({ fetch, url: `http://127.0.0.1:${port}/x`, method: "POST", token: "", body: "{}", timeoutMs: 2000, ctx }).catch((e) => e);
    expect(err).toBeInstanceOf(SandboxdTransport);
    expect((err as SandboxdTransport).delivered).toBe("no");
  });

  test("a reset after the request was written is 'maybe' delivered", async () => {
    const raw: NetServer = createServer((s) => s.on("data", () => s.destroy()));
    await new Promise<void>((r) => raw.listen(0, "127.0.0.1", r));
    const port = (raw.address() as { port: number }).port;
    const err = await exchange({ fetch, url: `http://127.0.0.1:${port}/x`, method: "POST", token: "", body: "{}", timeoutMs: 2000, ctx }).catch((e) => e);
    raw.close();
    expect(err).toBeInstanceOf(SandboxdTransport);
    expect((err as SandboxdTransport).delivered).toBe("maybe");
    expect((err as SandboxdTransport).timedOut).toBe(false);
  });

  test("the per-request deadline fires as a timed-out, maybe-delivered transport error", async () => {
    const t0 = performance.now();
    const err = await exchange({ fetch, url: `${base}/slow`, method: "GET", token: "", timeoutMs: 150, ctx }).catch((e) => e);
    expect(performance.now() - t0).toBeLessThan(1500);
    expect(err).toBeInstanceOf(SandboxdTransport);
    expect((err as SandboxdTransport).timedOut).toBe(true);
    expect((err as SandboxdTransport).delivered).toBe("maybe");
  });

  test("a caller's abort is reported as such, not as a timeout", async () => {
    const ac = new AbortController();
    setTimeout(() => ac.abort(new Error("shutting down")), 50);
    const err = await exchange({ fetch, url: `${base}/slow`, method: "GET", token: "", timeoutMs: 5000, signal: ac.signal, ctx }).catch((e) => e);
    expect(err).toBeInstanceOf(SandboxdTransport);
    expect((err as SandboxdTransport).timedOut).toBe(false);
    expect(((err as SandboxdTransport).cause as Error).message).toBe("shutting down");
  });
});

describe("statusError", () => {
  test.each([
    [400, SandboxdBadRequest],
    [401, SandboxdUnauthorized],
    [403, SandboxdForbidden],
    [409, SandboxdConflict],
    [412, SandboxdConflict],
    [429, SandboxdCapacity],
    [500, SandboxdServerError],
    [503, SandboxdServerError],
    [426, SandboxdUnexpectedStatus],
  ] as const)("status %d maps to its class with the node's error text", (status, cls) => {
    const e = statusError(reply(status, '{"error":"boom"}'), ctx);
    expect(e).toBeInstanceOf(cls);
    expect(e.serverMessage).toBe("boom");
    expect(e.status).toBe(status);
    expect(e.context.node).toBe("stub");
  });

  test("a JSON 404 is not-found; the mux's plain-text 404 and 405 are route misses", () => {
    expect(statusError(reply(404, '{"error":"unknown sandbox"}'), ctx)).toBeInstanceOf(SandboxdNotFound);
    const miss = statusError(reply(404, "404 page not found\n"), ctx);
    expect(miss).toBeInstanceOf(SandboxdRouteNotFound);
    expect(miss.serverMessage).toBe("404 page not found");
    expect(statusError(reply(405, "Method Not Allowed\n"), ctx)).toBeInstanceOf(SandboxdRouteNotFound);
  });

  test("429 and 503 carry Retry-After in milliseconds", () => {
    expect((statusError(reply(429, "{}", { "retry-after": "10" }), ctx) as SandboxdCapacity).retryAfterMs).toBe(10_000);
    expect((statusError(reply(503, "", { "retry-after": "1" }), ctx) as SandboxdServerError).retryAfterMs).toBe(1000);
  });

  test("plain text and empty error bodies are tolerated", () => {
    expect(errorText(new TextEncoder().encode("  bad gateway \n"))).toEqual({ text: "bad gateway", json: false });
    expect(statusError(reply(502, ""), ctx).serverMessage).toBeUndefined();
    expect(errorText(new TextEncoder().encode('{"error":5}')).json).toBe(false);
  });

  test("'provisioning failed' is recognised on a 500", () => {
    expect((statusError(reply(500, '{"error":"provisioning failed"}'), ctx) as SandboxdServerError).provisioningFailed).toBe(true);
    expect((statusError(reply(500, '{"error":"release failed"}'), ctx) as SandboxdServerError).provisioningFailed).toBe(false);
  });
});

describe("decodeJson", () => {
  const S = z.object({ a: z.number() });
  test("bad JSON and schema mismatch are protocol errors, never a partial value", () => {
    const bad = (() => { try { decodeJson(new TextEncoder().encode("{"), S, ctx); } catch (e) { return e; } })();
    expect((bad as SandboxdProtocol).problem).toBe("bad_json");
    const mismatch = (() => { try { decodeJson(new TextEncoder().encode('{"a":"x"}'), S, ctx); } catch (e) { return e; } })();
    expect((mismatch as SandboxdProtocol).problem).toBe("schema");
    expect(decodeJson(new TextEncoder().encode('{"a":1,"b":2}'), S, ctx)).toEqual({ a: 1 });
  });
});

describe("retries", () => {
  const policy = { attempts: 3, baseDelayMs: 1, maxDelayMs: 20 };
  const t = (timedOut: boolean) => new SandboxdTransport("x", ctx, { delivered: "maybe", timedOut });
  const s = (status: number, retryAfterMs?: number) => new SandboxdServerError("x", { ...ctx, status }, { retryAfterMs });

  test("safe calls retry resets and 5xx but not timeouts, 4xx or a long Retry-After", () => {
    expect(retryableForSafeCall(t(false), policy)).toBe(true);
    expect(retryableForSafeCall(t(true), policy)).toBe(false);
    expect(retryableForSafeCall(s(503), policy)).toBe(true);
    expect(retryableForSafeCall(s(503, 10_000), policy)).toBe(false);
    expect(retryableForSafeCall(s(501), policy)).toBe(false);
    expect(retryableForSafeCall(new SandboxdConflict("x", ctx), policy)).toBe(false);
  });

  test("withRetries stops at the attempt cap and returns the first success", async () => {
    let n = 0;
    const err = await withRetries(async () => { n++; throw t(false); }, () => true, policy).catch((e) => e);
    expect(n).toBe(3);
    expect(err).toBeInstanceOf(SandboxdTransport);
    let m = 0;
    expect(await withRetries(async () => { if (++m < 2) throw t(false); return "ok"; }, () => true, policy)).toBe("ok");
    expect(m).toBe(2);
  });

  test("Retry-After parses seconds and HTTP dates", () => {
    expect(parseRetryAfter("2")).toBe(2000);
    expect(parseRetryAfter(null)).toBeUndefined();
    const d = parseRetryAfter(new Date(Date.now() + 5000).toUTCString());
    expect(d).toBeGreaterThan(3000);
    expect(parseRetryAfter("soon")).toBeUndefined();
  });
});
