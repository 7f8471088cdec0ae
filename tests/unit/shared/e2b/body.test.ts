// The e2b surface's request-body cap (docs/e2b.md, spec e2b.md "Request bodies: JSON, at most 1 MiB"): a chunked
// body (no Content-Length) is capped like a declared one, read only until it crosses the cap, never buffered whole.
import { expect, test } from "bun:test";
import { z } from "@hono/zod-openapi";
import { MAX_BODY_BYTES, readJsonBody } from "#shared/e2b/body.ts";
import { E2bError } from "#shared/e2b/errors.ts";

const schema = z.object({ templateID: z.string() });

/** A body that never ends: 64 KiB chunks for as long as it is read. Counts what was pulled. */
function endless(): { body: ReadableStream<Uint8Array>; pulled: () => number } {
  let pulled = 0;
  const chunk = new Uint8Array(64 * 1024).fill(0x20);
  const body = new ReadableStream<Uint8Array>({
    pull(c) {
      pulled += chunk.length;
      c.enqueue(chunk);
    },
  });
  return { body, pulled: () => pulled };
}

test("an endless chunked body is refused as too large once it crosses the cap, having read little more than the cap", async () => {
  const src = endless();
  const req = new Request("http://e2b/sandboxes", { method: "POST", body: src.body, duplex: "half" } as RequestInit);
  expect(req.headers.get("content-length")).toBeNull();
  const err = await readJsonBody(req, schema, true).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(E2bError);
  expect([(err as E2bError).status, (err as E2bError).message]).toEqual([400, `invalid request body: larger than ${MAX_BODY_BYTES} bytes`]);
  // The stream's own read-ahead aside, the cap is what was pulled: the body was not buffered to its end.
  expect(src.pulled()).toBeLessThan(MAX_BODY_BYTES + 4 * 64 * 1024);
});

test("a declared Content-Length over the cap is refused before reading; a body within it is parsed", async () => {
  const big = new Request("http://e2b/sandboxes", { method: "POST", body: "x", headers: { "content-length": String(MAX_BODY_BYTES + 1) } });
  expect(await readJsonBody(big, schema, true).catch((e: unknown) => (e as E2bError).status)).toBe(400);
  const ok = new Request("http://e2b/sandboxes", { method: "POST", body: JSON.stringify({ templateID: "base" }) });
  expect(await readJsonBody(ok, schema, true)).toEqual({ templateID: "base" });
});

test("an invalid body's error names at most ten issues, each bounded, however many the body holds", async () => {
  const json = (b: unknown) => new Request("http://e2b/sandboxes", { method: "POST", body: JSON.stringify(b) });
  const withMetadata = z.object({ templateID: z.string(), metadata: z.record(z.string(), z.string()).optional() });
  // 80k invalid entries in one 1 MiB body: each named, the answer was ~6 MB (six times the request).
  const metadata = Object.fromEntries(Array.from({ length: 80_000 }, (_, i) => [`k${i}`, 0]));
  const flood = (await readJsonBody(json({ templateID: "base", metadata }), withMetadata, true).catch((e: unknown) => e)) as E2bError;
  expect(flood.status).toBe(400);
  expect(flood.message).toStartWith("invalid request body: metadata.k0: Invalid input: expected string, received number; metadata.k1: ");
  expect(flood.message).toEndWith("; and 79990 more");
  expect(flood.message).not.toContain("metadata.k10:");
  expect(flood.message.length).toBeLessThan(1000);
  // A key as long as the body is cut in the answer, not echoed whole.
  const long = (await readJsonBody(json({ templateID: "base", metadata: { ["k".repeat(500_000)]: 1 } }), withMetadata, true).catch((e: unknown) => e)) as E2bError;
  expect(long.message).toBe(`invalid request body: ${`metadata.${"k".repeat(120)}`.slice(0, 120)}…: Invalid input: expected string, received number`);
});
