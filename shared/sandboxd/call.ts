// The per-node call plumbing under SandboxdClient: one bounded exchange with logging, the status → typed error
// mapping, schema decoding and the retry rule chosen per route. The endpoint files (claim.ts, verbs.ts,
// reads.ts) only describe routes; every byte that reaches a node goes through NodeCaller.
import type { Logger } from "pino";
import type { z } from "zod";
import { type SandboxdErrorContext, SandboxdTransport, isNotFound } from "./errors.ts";
import { type RawReply, type RetryPolicy, decodeJson, exchange, retryableForSafeCall, statusError, withRetries } from "./http.ts";
import { DEFAULT_NET, DEFAULT_SIZE } from "./schemas.ts";

export interface CallOptions {
  signal?: AbortSignal;
  timeoutMs?: number;
}

/**
 * - `safe`: idempotent (GETs, PUT pools, drain, lifecycle verbs, deletes): retried on fast transport failures and
 *   500/502/503/504 (§8.6).
 * - `undelivered`: creates something (fork, promote, checkpoint): repeated only when nothing reached the node.
 * - `none`: a probe reports what it sees.
 */
export type RetryMode = "safe" | "undelivered" | "none";

export interface CallSpec<S extends z.ZodType | undefined> {
  method: "GET" | "POST" | "PUT" | "DELETE";
  path: string;
  query?: URLSearchParams;
  body?: unknown;
  schema: S;
  retry: RetryMode;
  /** Overrides the client's token for this call (a sandbox's own token). */
  token?: string;
  ctx?: Partial<SandboxdErrorContext>;
  opts?: CallOptions;
}

export interface NodeCallerOptions {
  baseUrl: string;
  token: string;
  log: Logger | undefined;
  timeoutMs: number;
  fetch: typeof fetch;
  retry: RetryPolicy;
}

export class NodeCaller {
  readonly baseUrl: string;
  readonly token: string;
  readonly log: Logger | undefined;
  readonly timeoutMs: number;
  readonly fetchImpl: typeof fetch;
  readonly retry: RetryPolicy;

  constructor(o: NodeCallerOptions) {
    this.baseUrl = o.baseUrl;
    this.token = o.token;
    this.log = o.log;
    this.timeoutMs = o.timeoutMs;
    this.fetchImpl = o.fetch;
    this.retry = o.retry;
  }

  ctx(method: string, path: string, extra?: Partial<SandboxdErrorContext>): SandboxdErrorContext {
    return { ...extra, node: this.baseUrl, route: `${method} ${path}` };
  }

  /** One exchange, no retry, non-2xx returned (not thrown) so the claim path can classify it itself. */
  exchangeOnce(
    method: string,
    path: string,
    query: URLSearchParams | undefined,
    body: unknown,
    c: SandboxdErrorContext,
    o: CallOptions | undefined,
    token: string,
  ): Promise<RawReply> {
    const qs = query && query.size > 0 ? `?${query.toString()}` : "";
    const started = performance.now();
    const p = exchange({
      fetch: this.fetchImpl,
      url: `${this.baseUrl}${path}${qs}`,
      method,
      token,
      body: body === undefined ? undefined : JSON.stringify(body),
      timeoutMs: o?.timeoutMs ?? this.timeoutMs,
      signal: o?.signal,
      ctx: c,
    });
    // Never log the token or the body (claim bodies may carry env secrets, preview bodies a sandbox token).
    const ms = () => Math.round(performance.now() - started);
    p.then(
      (r) => this.log?.debug({ route: c.route, status: r.status, ms: ms() }, "sandboxd call"),
      (e: Error) => this.log?.debug({ route: c.route, err: e.message, ms: ms() }, "sandboxd call failed"),
    );
    return p;
  }

  /** A whole call: exchange, map a non-2xx to its typed error, decode through the schema, retry per `spec.retry`. */
  call<S extends z.ZodType>(spec: CallSpec<S>): Promise<z.infer<S>>;
  call(spec: CallSpec<undefined>): Promise<RawReply>;
  async call(spec: CallSpec<z.ZodType | undefined>): Promise<unknown> {
    const c = this.ctx(spec.method, spec.path, spec.ctx);
    const token = spec.token ?? this.token;
    const once = async () => {
      const raw = await this.exchangeOnce(spec.method, spec.path, spec.query, spec.body, c, spec.opts, token);
      if (raw.status < 200 || raw.status >= 300) throw statusError(raw, c);
      return spec.schema === undefined ? raw : decodeJson(raw.body, spec.schema, { ...c, status: raw.status });
    };
    if (spec.retry === "none") return once();
    const retryable =
      spec.retry === "safe"
        ? (e: unknown) => retryableForSafeCall(e, this.retry)
        : (e: unknown) => e instanceof SandboxdTransport && e.delivered === "no";
    return withRetries(once, retryable, this.retry, {
      signal: spec.opts?.signal,
      onRetry: (e, attempt, delayMs) =>
        this.log?.warn({ route: c.route, attempt, delayMs: Math.round(delayMs), err: (e as Error).message }, "sandboxd call failed; retrying"),
    });
  }
}

/** One path segment (ids are opaque to us). */
export function enc(s: string): string {
  return encodeURIComponent(s);
}

/** The `template=&net=&size=[&digest=]` query of the template routes, defaults filled like a claim's. */
export function templateQuery(key: { template: string; net?: string; size?: string }, digest?: string): URLSearchParams {
  const q = new URLSearchParams({ template: key.template, net: key.net ?? DEFAULT_NET, size: key.size ?? DEFAULT_SIZE });
  if (digest) q.set("digest", digest);
  return q;
}

/** A delete (or release) whose 404 means "already gone": the outcome either way, other failures thrown. */
export async function goneOn404<T extends string>(done: T, run: () => Promise<unknown>): Promise<T | "already-gone"> {
  try {
    await run();
    return done;
  } catch (e) {
    if (isNotFound(e)) return "already-gone";
    throw e;
  }
}
