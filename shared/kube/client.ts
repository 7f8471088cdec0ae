// A thin Kubernetes REST client over Bun's fetch: JSON in and out, typed errors, a client-side rate limit, bearer
// or client-certificate auth, and watches decoded as they stream. Types come from @kubernetes/client-node at the
// call sites (import type only); nothing here loads it at run time.
import type { Logger } from "pino";
import type { KubeConnection } from "./connection.ts";
import { KubeApiError } from "./errors.ts";
import type { TokenBucket } from "./rate-limit.ts";
import { resourcePath, type ResourceRef } from "./resources.ts";
import { BearerToken, bunTransport, type Transport } from "./transport.ts";
import { decodeWatchStream, type WatchEvent } from "./watch-decoder.ts";
import { realClock } from "../clock/index.ts";

export type { WatchEvent } from "./watch-decoder.ts";

/** Per-request default; watches are exempt (they live for minutes and end on the server's timeoutSeconds). */
export const DEFAULT_TIMEOUT_MS = 30_000;

/** Retries of a 429 that carries Retry-After; the wait for each is capped at MAX_RETRY_AFTER_MS. */
export const MAX_429_RETRIES = 5;
const MAX_RETRY_AFTER_MS = 10_000;

export type Query = Record<string, string | number | boolean | undefined>;

export interface RequestOptions {
  query?: Query;
  body?: unknown;
  contentType?: string;
  signal?: AbortSignal;
  timeoutMs?: number;
}

export interface ClientOptions {
  limiter?: TokenBucket;
  userAgent?: string;
  log?: Logger;
  timeoutMs?: number;
  /** Replaces Bun's fetch; tests use it to count or fail requests. */
  transport?: Transport;
}

export interface ListResult<T> {
  items: T[];
  metadata: { resourceVersion: string; continue?: string; remainingItemCount?: number };
}

const PATCH_TYPES = {
  merge: "application/merge-patch+json",
  strategic: "application/strategic-merge-patch+json",
  json: "application/json-patch+json",
  apply: "application/apply-patch+yaml",
} as const;

type Meta = { metadata?: { name?: string; namespace?: string } };

export class KubeClient {
  readonly conn: KubeConnection;
  private readonly transport: Transport;
  private readonly token: BearerToken;
  private readonly limiter?: TokenBucket;
  private readonly userAgent: string;
  private readonly log?: Logger;
  private readonly timeoutMs: number;
  private requests = 0;

  constructor(conn: KubeConnection, opts: ClientOptions = {}) {
    this.conn = { ...conn, server: conn.server.replace(/\/+$/, "") };
    this.transport = opts.transport ?? bunTransport(this.conn);
    this.log = opts.log;
    this.token = new BearerToken(conn, 60_000, undefined, (e) =>
      this.log?.warn({ tokenFile: conn.tokenFile, err: (e as Error).message }, "re-reading the bearer token file failed; keeping the last token"),
    );
    this.limiter = opts.limiter;
    this.userAgent = opts.userAgent ?? "sandbox-control-plane";
    this.timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  }

  /** Total HTTP requests issued, watches included. */
  requestCount(): number {
    return this.requests;
  }

  /** The namespace to use when a call names none: the kubeconfig context's or the service account's. */
  get defaultNamespace(): string | undefined {
    return this.conn.namespace;
  }

  async request<T = unknown>(method: string, path: string, opts: RequestOptions & { verb?: string } = {}): Promise<T> {
    const verb = opts.verb ?? method.toLowerCase();
    const timeoutMs = opts.timeoutMs ?? this.timeoutMs;
    for (let attempt = 0; ; attempt++) {
      const res = await this.send(method, verb, path, opts, timeoutMs > 0 ? timeoutMs : undefined);
      const text = await res.text().catch((e) => {
        throw new KubeApiError({ status: 0, reason: "TransportError", verb, path, message: (e as Error).message, cause: e });
      });
      if (res.ok) return (text ? parseBody(text) : undefined) as T;
      const err = KubeApiError.fromResponse(res.status, verb, path, parseBody(text));
      if (res.status === 401) this.token.invalidate();
      // 429 is API Priority and Fairness turning the request away before it ran, so any verb may be retried; wait
      // as long as Retry-After says (client-go does the same, up to 10 times; we keep the wait bounded).
      const wait = retryAfterMs(res);
      if (res.status !== 429 || wait === undefined || attempt >= MAX_429_RETRIES) throw err;
      this.log?.debug({ verb, path, retryInMs: wait }, "kube request throttled by the server; retrying");
      await realClock.sleep(wait, opts.signal);
      opts.signal?.throwIfAborted();
    }
  }

  private async send(method: string, verb: string, path: string, opts: RequestOptions, timeoutMs: number | undefined, idleTimeoutMs?: number): Promise<Response> {
    // With a token in the bucket and the bearer token fresh, nothing here awaits before the transport: the request
    // leaves in the caller's own turn, ahead of whatever the caller does next (the status PUT goes out before the
    // rest of the claim's turn runs; docs/performance.md, "The single-Pod path").
    if (this.limiter && (opts.signal?.aborted || !this.limiter.tryAcquire())) await this.limiter.acquire(opts.signal);
    const headers: Record<string, string> = { Accept: "application/json", "User-Agent": this.userAgent };
    const token = this.token.fresh() ?? (await this.token.get());
    if (token) headers.Authorization = `Bearer ${token}`;
    let body: string | undefined;
    if (opts.body !== undefined) {
      body = typeof opts.body === "string" ? opts.body : JSON.stringify(opts.body);
      headers["Content-Type"] = opts.contentType ?? "application/json";
    }
    const timeout = timeoutMs !== undefined ? AbortSignal.timeout(timeoutMs) : undefined;
    const signals = [opts.signal, timeout].filter((s): s is AbortSignal => !!s);
    const signal = signals.length > 1 ? AbortSignal.any(signals) : signals[0];
    const url = this.conn.server + path + queryString(opts.query);
    const started = performance.now();
    this.requests++;
    let res: Response;
    try {
      res = await this.transport(url, { method, headers, body, signal, idleTimeoutMs });
    } catch (e) {
      // The caller's own abort is not a failure of the call: rethrow it unchanged so callers can tell.
      if (opts.signal?.aborted) throw opts.signal.reason ?? e;
      const timedOut = timeout?.aborted === true;
      this.log?.debug({ verb, path, err: (e as Error).message }, "kube request failed");
      throw new KubeApiError({
        status: 0,
        reason: timedOut ? "Timeout" : "TransportError",
        verb,
        path,
        message: timedOut ? `no response within ${timeoutMs} ms` : (e as Error).message,
        cause: e,
      });
    }
    this.log?.debug({ verb, path, status: res.status, ms: Math.round(performance.now() - started) }, "kube request");
    return res;
  }

  get<T>(res: ResourceRef, name: string, o: { namespace?: string; resourceVersion?: string; subresource?: string } = {}): Promise<T> {
    const path = resourcePath(res, { namespace: this.ns(res, o.namespace), name, subresource: o.subresource });
    return this.request<T>("GET", path, { verb: "get", query: { resourceVersion: o.resourceVersion } });
  }

  list<T>(
    res: ResourceRef,
    o: { namespace?: string; fieldSelector?: string; labelSelector?: string; resourceVersion?: string; limit?: number; continue?: string } = {},
  ): Promise<ListResult<T>> {
    const path = resourcePath(res, { namespace: o.namespace });
    return this.request<ListResult<T>>("GET", path, {
      verb: "list",
      query: {
        fieldSelector: o.fieldSelector,
        labelSelector: o.labelSelector,
        resourceVersion: o.resourceVersion,
        limit: o.limit,
        continue: o.continue,
      },
    }).then((r) => ({ ...r, items: r.items ?? [], metadata: { ...r.metadata, resourceVersion: r.metadata?.resourceVersion ?? "" } }));
  }

  create<T>(res: ResourceRef, obj: object, o: { namespace?: string; subresource?: string; name?: string } = {}): Promise<T> {
    const ns = this.ns(res, o.namespace ?? (obj as Meta).metadata?.namespace);
    // A subresource create (eviction, token) posts to a named object; a plain create posts to the collection.
    const name = o.subresource ? (o.name ?? (obj as Meta).metadata?.name) : undefined;
    const path = resourcePath(res, { namespace: ns, name, subresource: o.subresource });
    return this.request<T>("POST", path, { verb: "create", body: obj });
  }

  update<T>(res: ResourceRef, obj: object, o: { namespace?: string; subresource?: string } = {}): Promise<T> {
    const name = (obj as Meta).metadata?.name;
    if (!name) throw new Error(`update ${res.resource}: object has no metadata.name`);
    const path = resourcePath(res, { namespace: this.ns(res, o.namespace ?? (obj as Meta).metadata?.namespace), name, subresource: o.subresource });
    return this.request<T>("PUT", path, { verb: "update", body: obj });
  }

  patch<T>(
    res: ResourceRef,
    name: string,
    patch: unknown,
    o: { namespace?: string; type: "merge" | "strategic" | "json" | "apply"; subresource?: string; fieldManager?: string; force?: boolean },
  ): Promise<T> {
    if (o.type === "apply" && !o.fieldManager) throw new Error(`apply ${res.resource}/${name}: a fieldManager is required`);
    const path = resourcePath(res, { namespace: this.ns(res, o.namespace), name, subresource: o.subresource });
    return this.request<T>("PATCH", path, {
      verb: o.type === "apply" ? "apply" : "patch",
      body: patch,
      contentType: PATCH_TYPES[o.type],
      query: { fieldManager: o.fieldManager, force: o.force ? true : undefined },
    });
  }

  /** Server-side apply. JSON is valid YAML, so the body is the object as JSON under the apply-patch content type. */
  apply<T>(res: ResourceRef, obj: object, o: { namespace?: string; fieldManager: string; force?: boolean; subresource?: string }): Promise<T> {
    const name = (obj as Meta).metadata?.name;
    if (!name) throw new Error(`apply ${res.resource}: object has no metadata.name`);
    return this.patch<T>(res, name, obj, { ...o, namespace: o.namespace ?? (obj as Meta).metadata?.namespace, type: "apply" });
  }

  async delete(
    res: ResourceRef,
    name: string,
    o: { namespace?: string; gracePeriodSeconds?: number; preconditions?: { uid?: string; resourceVersion?: string }; propagationPolicy?: string } = {},
  ): Promise<void> {
    const path = resourcePath(res, { namespace: this.ns(res, o.namespace), name });
    const hasOptions = o.gracePeriodSeconds !== undefined || o.preconditions || o.propagationPolicy;
    await this.request("DELETE", path, {
      verb: "delete",
      body: hasOptions
        ? {
            apiVersion: "v1",
            kind: "DeleteOptions",
            gracePeriodSeconds: o.gracePeriodSeconds,
            preconditions: o.preconditions,
            propagationPolicy: o.propagationPolicy,
          }
        : undefined,
    });
  }

  /**
   * Streams watch events until the server ends the watch (timeoutSeconds), the signal aborts (the iteration then
   * just ends), or the connection fails (throws KubeApiError). An ERROR event (410 Expired, for instance) is
   * yielded as-is; a non-2xx response to the watch request throws.
   */
  async *watch<T>(
    res: ResourceRef,
    o: {
      namespace?: string;
      resourceVersion: string;
      fieldSelector?: string;
      labelSelector?: string;
      allowWatchBookmarks?: boolean;
      timeoutSeconds?: number;
      signal: AbortSignal;
    },
  ): AsyncGenerator<WatchEvent<T>> {
    const path = resourcePath(res, { namespace: o.namespace });
    const query: Query = {
      watch: 1,
      resourceVersion: o.resourceVersion,
      fieldSelector: o.fieldSelector,
      labelSelector: o.labelSelector,
      allowWatchBookmarks: o.allowWatchBookmarks ? true : undefined,
      timeoutSeconds: o.timeoutSeconds,
    };
    // Only the wait for headers is bounded by the request timeout; the stream then lives until the server ends it.
    // Bun's socket idle timer catches a dead peer: the server sends a bookmark about once a minute.
    const headers = new AbortController();
    const timer = setTimeout(() => headers.abort(new Error("watch: no response headers in time")), this.timeoutMs);
    const idleTimeoutMs = Math.max(5 * 60_000, ((o.timeoutSeconds ?? 0) + 60) * 1000);
    let resp: Response;
    try {
      resp = await this.send("GET", "watch", path, { query, signal: AbortSignal.any([o.signal, headers.signal]) }, undefined, idleTimeoutMs);
    } catch (e) {
      if (o.signal.aborted) return;
      if (headers.signal.aborted) throw new KubeApiError({ status: 0, reason: "Timeout", verb: "watch", path, message: `no response within ${this.timeoutMs} ms`, cause: e });
      throw e;
    } finally {
      clearTimeout(timer);
    }
    if (!resp.ok) {
      const text = await resp.text().catch(() => "");
      throw KubeApiError.fromResponse(resp.status, "watch", path, parseBody(text));
    }
    if (!resp.body) return;
    try {
      for await (const ev of decodeWatchStream<T>(resp.body, o.signal)) {
        if (o.signal.aborted) return;
        yield ev;
      }
    } catch (e) {
      if (o.signal.aborted) return;
      if (e instanceof KubeApiError) throw e;
      throw new KubeApiError({ status: 0, reason: "TransportError", verb: "watch", path, message: (e as Error).message, cause: e });
    }
  }

  private ns(res: ResourceRef, ns: string | undefined): string | undefined {
    if (!res.namespaced) return undefined;
    const v = ns ?? this.conn.namespace;
    if (!v) throw new Error(`${res.resource} is namespaced: a namespace is required`);
    return v;
  }
}

function retryAfterMs(res: Response): number | undefined {
  const h = res.headers.get("retry-after");
  if (h === null) return undefined;
  const s = Number(h);
  if (!Number.isFinite(s) || s < 0) return undefined;
  return Math.min(s * 1000, MAX_RETRY_AFTER_MS);
}


function queryString(q: Query | undefined): string {
  if (!q) return "";
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(q)) if (v !== undefined) p.set(k, String(v));
  const s = p.toString();
  return s ? `?${s}` : "";
}

function parseBody(text: string): unknown {
  if (!text) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
