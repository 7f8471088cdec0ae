// Transport helpers for the sandboxd client: one bounded exchange (fetch + capped body read under a single
// deadline), status → typed error mapping, JSON decoding through a zod schema, and the safe-retry loop.
// Kept apart from client.ts so the endpoint methods read as a list of routes.
import type { z } from "zod";
import {
  SandboxdBadRequest,
  SandboxdCapacity,
  SandboxdConflict,
  type SandboxdError,
  type SandboxdErrorContext,
  SandboxdForbidden,
  SandboxdNotFound,
  SandboxdProtocol,
  SandboxdRouteNotFound,
  SandboxdServerError,
  SandboxdTransport,
  SandboxdUnauthorized,
  SandboxdUnexpectedStatus,
} from "./errors.ts";
import { realClock } from "../clock/index.ts";
import { ErrorBody } from "./schemas.ts";
import { errorMessage } from "../log/index.ts";

/** JSON replies above this are refused whole (§8.3); we read one byte past to know. */
export const MAX_REPLY_BYTES = 16 * 1024 * 1024;
/** Error bodies are only read this far: we need the `error` text, not a megabyte of HTML from a proxy. */
export const MAX_ERROR_BYTES = 64 * 1024;
/** The reference store's per-request budget (§8.2). Cold claims take a per-call override. */
export const DEFAULT_TIMEOUT_MS = 10_000;
/** Longest server message we copy into an Error's text (the full text stays in `serverMessage`). */
const MESSAGE_PREVIEW = 300;

export interface ExchangeRequest {
  fetch: typeof fetch;
  url: string;
  method: string;
  token: string;
  /** Already-serialized JSON; sent with a JSON content type. */
  body?: string;
  timeoutMs: number;
  signal?: AbortSignal;
  ctx: SandboxdErrorContext;
  /** Cap for a 2xx body (an error body is always capped at MAX_ERROR_BYTES). */
  maxReplyBytes?: number;
}

export interface RawReply {
  status: number;
  headers: Headers;
  /** Whole body for 2xx (never truncated); at most MAX_ERROR_BYTES for anything else. */
  body: Uint8Array;
}

/**
 * One HTTP exchange with the node. The deadline covers connect, headers and body, like Go's
 * `http.Client.Timeout`. The body is always either read to the end or cancelled, so the keep-alive
 * connection goes back to the pool. Throws SandboxdTransport (no usable reply) or SandboxdProtocol
 * (2xx body over the cap); a non-2xx reply is returned, not thrown, so the caller can map it.
 */
export async function exchange(r: ExchangeRequest): Promise<RawReply> {
  const ac = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    ac.abort(new Error(`sandboxd request timed out after ${r.timeoutMs} ms`));
  }, r.timeoutMs);
  const onOuterAbort = () => ac.abort(r.signal?.reason);
  if (r.signal?.aborted) onOuterAbort();
  else r.signal?.addEventListener("abort", onOuterAbort, { once: true });

  const headers: Record<string, string> = { accept: "application/json" };
  // No header at all when the token is empty: an open node must not see "Bearer " (§8.1).
  if (r.token !== "") headers.authorization = `Bearer ${r.token}`;
  if (r.body !== undefined) headers["content-type"] = "application/json";

  let res: Response;
  try {
    res = await r.fetch(r.url, { method: r.method, headers, body: r.body, signal: ac.signal, redirect: "manual" });
  } catch (e) {
    cleanup();
    throw transportError(e, r.ctx, timedOut, r.signal);
  }
  const ctx = { ...r.ctx, status: res.status };
  const ok = res.status >= 200 && res.status < 300;
  const cap = ok ? (r.maxReplyBytes ?? MAX_REPLY_BYTES) : MAX_ERROR_BYTES;
  try {
    const { bytes, over } = await readCapped(res, cap);
    if (over && ok) {
      throw new SandboxdProtocol(`sandboxd reply to ${r.ctx.route} exceeds ${cap} bytes`, ctx, { problem: "oversize" });
    }
    return { status: res.status, headers: res.headers, body: bytes };
  } catch (e) {
    if (e instanceof SandboxdProtocol) throw e;
    throw transportError(e, ctx, timedOut, r.signal, "reading the reply");
  } finally {
    cleanup();
  }

  function cleanup() {
    clearTimeout(timer);
    r.signal?.removeEventListener("abort", onOuterAbort);
  }
}

/**
 * Read at most `cap` bytes. A declared Content-Length over the cap is refused without reading; otherwise we
 * read until one byte past the cap, then cancel. `over` tells the caller the body is incomplete.
 */
export async function readCapped(res: Response, cap: number): Promise<{ bytes: Uint8Array; over: boolean }> {
  if (res.body === null) return { bytes: new Uint8Array(0), over: false };
  const declared = Number(res.headers.get("content-length") ?? Number.NaN);
  if (Number.isFinite(declared) && declared > cap) {
    await res.body.cancel().catch(() => {});
    return { bytes: new Uint8Array(0), over: true };
  }
  // A declared length within the cap and no content coding: the framing already bounds the body, so read it in one
  // native step instead of pumping the stream chunk by chunk (most node replies; it is on the create path). A coded
  // body is decoded by fetch and may outgrow its declared length, so it keeps the counted read below.
  const coding = res.headers.get("content-encoding");
  if (Number.isFinite(declared) && declared >= 0 && (coding === null || coding === "identity")) {
    const bytes = new Uint8Array(await res.arrayBuffer());
    return bytes.byteLength > cap ? { bytes: bytes.subarray(0, cap), over: true } : { bytes, over: false };
  }
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
      total += value.byteLength;
      if (total > cap) {
        await reader.cancel().catch(() => {});
        return { bytes: concat(chunks, cap), over: true };
      }
    }
  } finally {
    reader.releaseLock();
  }
  return { bytes: concat(chunks, total), over: false };
}

function concat(chunks: Uint8Array[], limit: number): Uint8Array {
  const out = new Uint8Array(Math.min(limit, chunks.reduce((n, c) => n + c.byteLength, 0)));
  let at = 0;
  for (const c of chunks) {
    if (at >= out.length) break;
    const take = c.subarray(0, out.length - at);
    out.set(take, at);
    at += take.byteLength;
  }
  return out;
}

/** Connection errors that prove the request never left: nothing was connected, so nothing was sent. */
const NEVER_CONNECTED = new Set([
  "ECONNREFUSED",
  "ConnectionRefused",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ERR_INVALID_URL",
  "FailedToOpenSocket",
]);

function transportError(
  e: unknown,
  ctx: SandboxdErrorContext,
  timedOut: boolean,
  outer: AbortSignal | undefined,
  phase = "sending the request",
): SandboxdTransport {
  const code = typeof (e as { code?: unknown })?.code === "string" ? (e as { code: string }).code : undefined;
  if (timedOut) {
    return new SandboxdTransport(`sandboxd ${ctx.route} on ${ctx.node}: timed out ${phase}`, ctx, {
      delivered: "maybe",
      timedOut: true,
      cause: e,
    });
  }
  if (outer?.aborted) {
    return new SandboxdTransport(`sandboxd ${ctx.route} on ${ctx.node}: aborted by the caller`, ctx, {
      delivered: "maybe",
      cause: outer.reason ?? e,
    });
  }
  const never = code !== undefined && NEVER_CONNECTED.has(code) && phase === "sending the request";
  const what = errorMessage(e);
  return new SandboxdTransport(`sandboxd ${ctx.route} on ${ctx.node}: ${phase} failed: ${code ?? what}`, ctx, {
    delivered: never ? "no" : "maybe",
    cause: e,
  });
}

/** `Retry-After` as delta-seconds or an HTTP date, in milliseconds. */
export function parseRetryAfter(h: string | null): number | undefined {
  if (h === null || h.trim() === "") return undefined;
  const s = Number(h.trim());
  if (Number.isFinite(s) && s >= 0) return s * 1000;
  const at = Date.parse(h);
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now());
}

/** Best effort: `{"error":"…"}` → its text; anything else → the trimmed body text (plain text tolerated). */
export function errorText(body: Uint8Array): { text: string; json: boolean } {
  const raw = new TextDecoder().decode(body);
  try {
    const parsed = ErrorBody.safeParse(JSON.parse(raw));
    if (parsed.success) return { text: parsed.data.error, json: true };
  } catch {
    // not JSON: fall through to plain text
  }
  return { text: raw.trim(), json: false };
}

/** Map a non-2xx reply to its typed error. */
export function statusError(reply: RawReply, ctx: SandboxdErrorContext): SandboxdError {
  const c = { ...ctx, status: reply.status };
  const { text, json } = errorText(reply.body);
  const preview = text.length > MESSAGE_PREVIEW ? `${text.slice(0, MESSAGE_PREVIEW)}…` : text;
  const msg = `sandboxd ${ctx.route} on ${ctx.node}: ${reply.status}${preview ? ` ${preview}` : ""}`;
  const o = { serverMessage: text || undefined };
  const retryAfterMs = parseRetryAfter(reply.headers.get("retry-after"));
  switch (reply.status) {
    case 400:
    case 413:
      return new SandboxdBadRequest(msg, c, o);
    case 401:
      return new SandboxdUnauthorized(msg, c, o);
    case 403:
      return new SandboxdForbidden(msg, c, o);
    case 404:
      // Only a handled `{"error"}` 404 speaks about the resource; the mux's plain text speaks about the route.
      return json ? new SandboxdNotFound(msg, c, o) : new SandboxdRouteNotFound(msg, c, o);
    case 405:
      return new SandboxdRouteNotFound(msg, c, o);
    case 409:
    case 412:
      return new SandboxdConflict(msg, c, o);
    case 429:
      return new SandboxdCapacity(msg, c, { ...o, retryAfterMs });
  }
  if (reply.status >= 500) return new SandboxdServerError(msg, c, { ...o, retryAfterMs });
  return new SandboxdUnexpectedStatus(msg, c, o);
}

/** Parse a 2xx body as JSON; SandboxdProtocol (`bad_json`) when it is not. */
export function parseJson(body: Uint8Array, ctx: SandboxdErrorContext): unknown {
  try {
    return JSON.parse(new TextDecoder().decode(body));
  } catch (e) {
    throw new SandboxdProtocol(`sandboxd ${ctx.route} on ${ctx.node}: reply is not JSON`, ctx, {
      problem: "bad_json",
      cause: e,
    });
  }
}

/** Decode a 2xx JSON body through its wire schema. Never decodes a truncated body (exchange refuses those). */
export function decodeJson<S extends z.ZodType>(body: Uint8Array, schema: S, ctx: SandboxdErrorContext): z.infer<S> {
  return validate(parseJson(body, ctx), schema, ctx);
}

/** Check an already-parsed JSON value against its wire schema. */
export function validate<S extends z.ZodType>(v: unknown, schema: S, ctx: SandboxdErrorContext): z.infer<S> {
  const parsed = schema.safeParse(v);
  if (!parsed.success) {
    throw new SandboxdProtocol(
      `sandboxd ${ctx.route} on ${ctx.node}: reply does not match the schema: ${parsed.error.message.slice(0, MESSAGE_PREVIEW)}`,
      ctx,
      { problem: "schema", cause: parsed.error },
    );
  }
  return parsed.data;
}

export interface RetryPolicy {
  /** Total tries, first included. */
  attempts: number;
  baseDelayMs: number;
  maxDelayMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = { attempts: 3, baseDelayMs: 100, maxDelayMs: 2_000 };

/**
 * Whether an idempotent call (GETs, PUT pools, drain, lifecycle verbs, deletes) is worth repeating: fast
 * transport failures (refused, reset) and 500/502/503/504. Not a timeout: the per-request budget is what
 * callers reason about, and tripling it against a hung node helps nobody. Not 4xx, not a bad reply. Not a
 * 503 whose Retry-After exceeds our longest backoff: the caller should come back later instead.
 */
export function retryableForSafeCall(e: unknown, policy: RetryPolicy): boolean {
  if (e instanceof SandboxdTransport) return !e.timedOut;
  if (e instanceof SandboxdServerError) {
    if (![500, 502, 503, 504].includes(e.status ?? 0)) return false;
    return e.retryAfterMs === undefined || e.retryAfterMs <= policy.maxDelayMs;
  }
  return false;
}

/** Run `fn` up to `policy.attempts` times while `retryable(err)` holds, with jittered exponential backoff. */
export async function withRetries<T>(
  fn: (attempt: number) => Promise<T>,
  retryable: (e: unknown) => boolean,
  policy: RetryPolicy,
  o?: { signal?: AbortSignal; onRetry?: (e: unknown, attempt: number, delayMs: number) => void },
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn(attempt);
    } catch (e) {
      if (attempt >= policy.attempts || o?.signal?.aborted || !retryable(e)) throw e;
      const exp = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** (attempt - 1));
      const hinted = (e as { retryAfterMs?: number }).retryAfterMs;
      const delay = Math.max(hinted ?? 0, exp / 2 + Math.random() * (exp / 2));
      o?.onRetry?.(e, attempt, delay);
      await realClock.sleep(delay, o?.signal);
    }
  }
}

