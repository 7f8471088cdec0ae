// The one typed sandboxd client every binary uses (spec: ../shared/spec/sandboxd.md §8 "Client requirements").
// One instance talks to one node. Wire types come from ./schemas.ts; failures are the typed classes of
// ./errors.ts; the bounded exchange, error mapping and retry loop live in ./http.ts.
//
// This file is longer than our ~400-line habit because the claim path (redirect replay, reconciliation after a
// lost reply) must sit next to the endpoint it protects; everything else here is one short method per route.
import { createHash } from "node:crypto";
import type { Logger } from "pino";
import type { z } from "zod";
import {
  type RedirectAttempt,
  SandboxdAmbiguousClaim,
  SandboxdCapacity,
  type SandboxdError,
  type SandboxdErrorContext,
  SandboxdProtocol,
  SandboxdRedirect,
  SandboxdServerError,
  SandboxdTransport,
  SandboxdUnauthorized,
  isNotFound,
  provablyUndelivered,
} from "./errors.ts";
import {
  DEFAULT_RETRY,
  DEFAULT_TIMEOUT_MS,
  type RawReply,
  type RetryPolicy,
  decodeJson,
  exchange,
  retryableForSafeCall,
  statusError,
  validate,
  withRetries,
} from "./http.ts";
import {
  type CheckpointClaimRequest,
  type CheckpointRequest,
  type ClaimRequest,
  type ForkRequest,
  type InstanceMetadata,
  type Metadata,
  type PoolEntryInput,
  type PoolKey,
  type PromoteRequest,
  type RenewRequest,
  type SandboxRow,
  Checkpoint,
  CheckpointList,
  CheckpointReply,
  ClaimReply,
  DEFAULT_NET,
  DEFAULT_SIZE,
  ForkReply,
  GO_ZERO_TIME,
  Info,
  ListReply,
  PeersReply,
  PromoteReply,
  RedirectReply,
  RenewReply,
  SandboxDetail,
  Stats,
  OwnerReply,
} from "./schemas.ts";

/** A cold claim (unpooled key) may block for the node's 90 s cold-probe window; pass this as `timeoutMs`. */
export const COLD_CLAIM_TIMEOUT_MS = 95_000;

export interface SandboxdClientOptions {
  /** `http://host:port` or a full origin; see {@link SandboxdClient.baseUrlFor} for inventory addresses. */
  baseUrl: string;
  /** Fleet root token (or a tenant token). Empty or absent: no Authorization header at all. */
  token?: string;
  log?: Logger;
  /** Per-request budget covering connect, headers and body. Default 10 s. */
  timeoutMs?: number;
  fetch?: typeof fetch;
  /** Safe-retry policy for idempotent calls. Default 3 attempts, 100 ms base, 2 s cap. */
  retry?: Partial<RetryPolicy>;
}

export interface CallOptions {
  signal?: AbortSignal;
  timeoutMs?: number;
}

export interface ClaimOptions extends CallOptions {
  /** Follow a `{"redirect":[…]}` reply (one hop). Default true; false throws SandboxdRedirect. */
  followRedirects?: boolean;
  /** Map a redirect target address to a client, or undefined to skip an unknown target. Default: trust it. */
  resolveTarget?: (addr: string) => SandboxdClient | undefined;
  /** Ids the caller already holds for this claim_ref; reconciliation never adopts them. */
  knownIds?: Iterable<string>;
  /** Reconcile a possibly-delivered claim by listing (default true). False throws SandboxdAmbiguousClaim at once. */
  reconcile?: boolean;
}

/** A claim reply; `adopted` is set when it was rebuilt from the listing after the node's reply was lost. */
export type ClaimResult = ClaimReply & { adopted?: true };

export interface ListFilter {
  claimRef?: string;
  metadata?: Record<string, string>;
  tenant?: string;
}

type RetryMode = "safe" | "undelivered" | "none";

interface CallSpec<S extends z.ZodType | undefined> {
  method: "GET" | "POST" | "PUT" | "DELETE";
  path: string;
  query?: URLSearchParams;
  body?: unknown;
  schema: S;
  retry: RetryMode;
  token?: string;
  ctx?: Partial<SandboxdErrorContext>;
  opts?: CallOptions;
}

/** How to find "our" sandbox in a listing after a claim-style reply was lost. */
interface Reconciler {
  filter: ListFilter;
  matches: (row: SandboxRow) => boolean;
}

export class SandboxdClient {
  readonly baseUrl: string;
  private readonly token: string;
  private readonly log: Logger | undefined;
  /** The caller's logger, unbound, so clients derived for redirect targets bind their own node. */
  private readonly rootLog: Logger | undefined;
  private readonly timeoutMs: number;
  private readonly fetchImpl: typeof fetch;
  private readonly retry: RetryPolicy;

  /** No side effects: nothing is dialled until the first call. */
  constructor(o: SandboxdClientOptions) {
    this.baseUrl = o.baseUrl.replace(/\/+$/, "");
    this.token = o.token ?? "";
    this.rootLog = o.log;
    this.log = o.log?.child({ sandboxd: this.baseUrl });
    this.timeoutMs = o.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.fetchImpl = o.fetch ?? fetch;
    this.retry = { ...DEFAULT_RETRY, ...o.retry };
  }

  /** An inventory address (`host:port`) or a full origin → base URL: `http://` only when there is no `://`. */
  static baseUrlFor(address: string): string {
    const a = address.trim().replace(/\/+$/, "");
    return a.includes("://") ? a : `http://${a}`;
  }

  /** A client for another node with the same credentials and settings (redirect targets). */
  forAddress(address: string): SandboxdClient {
    return new SandboxdClient({
      baseUrl: SandboxdClient.baseUrlFor(address),
      token: this.token,
      log: this.rootLog,
      timeoutMs: this.timeoutMs,
      fetch: this.fetchImpl,
      retry: this.retry,
    });
  }

  // ---------------------------------------------------------------------------------------------------------
  // Claiming (§3): never idempotent. See claimLike for the retry/redirect/reconcile rules.

  /**
   * `POST /v1/claim`. Always send a `claim_ref`: it is what a lost reply is reconciled by. Throws
   * SandboxdCapacity / SandboxdRedirect (nothing handed out, try elsewhere), SandboxdAmbiguousClaim (maybe
   * handed out, could not be pinned down), or the node's typed error.
   */
  claim(req: ClaimRequest, o: ClaimOptions = {}): Promise<ClaimResult> {
    const template = req.template;
    const net = req.net ?? DEFAULT_NET;
    const size = req.size ?? DEFAULT_SIZE;
    const rec: Reconciler | undefined =
      req.claim_ref === undefined || req.claim_ref === ""
        ? undefined
        : {
            filter: { claimRef: req.claim_ref },
            matches: (r) => r.key.template === template && r.key.net === net && r.key.size === size,
          };
    return this.claimLike("/v1/claim", req, { claimRef: req.claim_ref }, rec, o);
  }

  /** `POST /v1/checkpoints/{id}/claim`: a branch claim; same rules as {@link claim}, reconciled by `from_checkpoint`. */
  claimCheckpoint(checkpointId: string, req: CheckpointClaimRequest = {}, o: ClaimOptions = {}): Promise<ClaimResult> {
    const rec: Reconciler = {
      filter: { claimRef: req.claim_ref, metadata: req.metadata },
      matches: (r) => r.from_checkpoint === checkpointId,
    };
    return this.claimLike(`/v1/checkpoints/${enc(checkpointId)}/claim`, req, { checkpointId }, rec, o);
  }

  /**
   * The claim rules (spec §8.4–8.5):
   * - Nothing here repeats a claim at the same node. A capacity miss (429, 200 without id), a refused
   *   connection or `500 provisioning failed` surface as errors for which `provablyUndelivered` is true.
   * - After a possibly-delivered failure (timeout or reset once sent, an unusable 200, any other 5xx) we do
   *   not re-claim: we list the node by the request's identity (claim_ref, or from_checkpoint for a branch)
   *   and adopt only when EXACTLY ONE row matches the key and is unknown to the caller (not in `knownIds`).
   *   claim_ref is not unique, so zero or several such rows are a SandboxdAmbiguousClaim listing the
   *   candidates: zero may mean "never committed" or "still provisioning" (a cold claim), several means we
   *   cannot tell ours from another claimer's. We release nothing we cannot prove is ours; the TTL bounds any
   *   leak and the caller's orphan audit finds it. A lone unknown row is adopted even if it predates this
   *   send (no time window: node and caller clocks need not agree): it carries our claim_ref and key, so it
   *   is a VM claimed for the same object that nobody holds, and adopting it beats leaking it. The adopted
   *   reply carries the row's real deadline. This is only sound when one caller claims per claim_ref at a
   *   time (vk-sandbox: one pod key; the apiserver: one object name) — pass `knownIds` for the rest.
   *   Adoption reads the token with `GET /v1/sandboxes/{id}`, which needs the root token; without it the
   *   claim is ambiguous too.
   * - A redirect replays the identical body with `no_redirect:true` (+ `require_promoted` when carried) at
   *   each target in order: an undelivered answer moves on, any other error stops, unknown targets are
   *   skipped, a 401 at a target falls back to the origin (no_redirect), one hop only, and running out of
   *   targets is a capacity miss (SandboxdRedirect, exhausted).
   */
  private async claimLike(
    path: string,
    body: ClaimRequest | CheckpointClaimRequest,
    ctx: Partial<SandboxdErrorContext>,
    rec: Reconciler | undefined,
    o: ClaimOptions,
  ): Promise<ClaimResult> {
    const reply = await this.claimOnce(path, body, ctx, rec, o);
    if (!("redirect" in reply)) return reply;

    const c = this.ctx("POST", path, ctx);
    const requirePromoted = reply.require_promoted === true;
    if (o.followRedirects === false || body.no_redirect === true) {
      throw new SandboxdRedirect(`sandboxd ${c.route} on ${c.node}: redirected to [${reply.redirect.join(", ")}]`, c, {
        targets: reply.redirect,
        requirePromoted,
        exhausted: false,
      });
    }
    const replay = { ...body, no_redirect: true, ...(requirePromoted ? { require_promoted: true } : {}) };
    const hop: ClaimOptions = { ...o, followRedirects: false };
    const attempts: RedirectAttempt[] = [];
    for (const target of reply.redirect) {
      const client = o.resolveTarget ? o.resolveTarget(target) : this.forAddress(target);
      if (client === undefined) {
        attempts.push({ target, outcome: "skipped" });
        continue;
      }
      try {
        return await client.claimLike(path, replay, ctx, rec, hop);
      } catch (e) {
        if (e instanceof SandboxdUnauthorized) {
          // The target does not know our token (token-set rotation in progress): let the origin serve locally.
          this.log?.warn({ route: c.route, target }, "sandboxd redirect target refused our token; claiming at the origin");
          return await this.claimLike(path, replay, ctx, rec, hop);
        }
        if (!provablyUndelivered(e)) throw e;
        attempts.push({ target, outcome: e as SandboxdError });
      }
    }
    throw new SandboxdRedirect(
      `sandboxd ${c.route} on ${c.node}: no redirect target served the claim (${attempts.length} tried or skipped)`,
      c,
      { targets: reply.redirect, requirePromoted, exhausted: true, attempts },
    );
  }

  /** One claim exchange at this node: a claim, a redirect, or a thrown error (reconciled when ambiguous). */
  private async claimOnce(
    path: string,
    body: ClaimRequest | CheckpointClaimRequest,
    ctxExtra: Partial<SandboxdErrorContext>,
    rec: Reconciler | undefined,
    o: ClaimOptions,
  ): Promise<ClaimReply | RedirectReply> {
    const c = this.ctx("POST", path, ctxExtra);
    let raw: RawReply;
    try {
      raw = await this.exchangeOnce("POST", path, undefined, body, c, o, this.token);
    } catch (e) {
      // A reset or timeout once sent, or an oversize 200: the node may have handed a VM out.
      if (e instanceof SandboxdTransport && e.delivered === "maybe") return this.reconcile(e, c, rec, o);
      if (e instanceof SandboxdProtocol) return this.reconcile(e, c, rec, o);
      throw e;
    }
    if (raw.status < 200 || raw.status >= 300) {
      const err = statusError(raw, c);
      if (err instanceof SandboxdServerError && !err.provisioningFailed) return this.reconcile(err, c, rec, o);
      throw err;
    }
    const okCtx = { ...c, status: raw.status };
    let v: unknown;
    try {
      v = JSON.parse(new TextDecoder().decode(raw.body));
    } catch (e) {
      const err = new SandboxdProtocol(`sandboxd ${c.route} on ${c.node}: reply is not JSON`, okCtx, { problem: "bad_json", cause: e });
      return this.reconcile(err, c, rec, o);
    }
    if (v !== null && typeof v === "object" && "redirect" in v) {
      const r = validate(v, RedirectReply, okCtx);
      if (r.redirect.length === 0) throw new SandboxdCapacity(`sandboxd ${c.route} on ${c.node}: empty redirect`, okCtx);
      return r;
    }
    const id = v !== null && typeof v === "object" ? (v as { id?: unknown }).id : undefined;
    if (id === undefined || id === null || id === "") {
      // A 200 without an id hands out nothing: a capacity miss (vk-sandbox.md §6, sandboxd.md §8.4).
      throw new SandboxdCapacity(`sandboxd ${c.route} on ${c.node}: claim reply carries no id`, okCtx);
    }
    try {
      return validate(v, ClaimReply, okCtx);
    } catch (e) {
      return this.reconcile(e as SandboxdProtocol, c, rec, o);
    }
  }

  private async reconcile(
    cause: Error,
    c: SandboxdErrorContext,
    rec: Reconciler | undefined,
    o: ClaimOptions,
  ): Promise<ClaimReply> {
    const ambiguous = (why: string, candidates: string[] = [], extra?: unknown) =>
      new SandboxdAmbiguousClaim(
        `sandboxd ${c.route} on ${c.node}: claim may have been handed out (${cause.message}); ${why}`,
        c,
        { candidates, cause: extra === undefined ? cause : new AggregateError([cause, extra], why) },
      );
    if (rec === undefined) throw ambiguous("no claim_ref to reconcile by");
    if (o.reconcile === false) throw ambiguous("reconciliation disabled by the caller");
    // Reconcile without the caller's signal: an abort already cost us the reply, not the right to look.
    let rows: SandboxRow[];
    try {
      rows = await this.list(rec.filter);
    } catch (e) {
      throw ambiguous("and the node could not be listed to reconcile", [], e);
    }
    const known = new Set(o.knownIds ?? []);
    const candidates = rows.filter((r) => !known.has(r.id) && rec.matches(r));
    const ids = candidates.map((r) => r.id);
    this.log?.warn({ route: c.route, claimRef: c.claimRef, candidates: ids, err: cause.message }, "sandboxd claim reply lost; reconciling by listing");
    if (candidates.length !== 1) {
      throw ambiguous(candidates.length === 0 ? "no matching sandbox is listed (yet)" : "several matching sandboxes are listed", ids);
    }
    const row = candidates[0] as SandboxRow;
    let detail: SandboxDetail;
    try {
      detail = await this.get(row.id);
    } catch (e) {
      throw ambiguous(`sandbox ${row.id} matches but could not be read back`, ids, e);
    }
    if (!detail.token) throw ambiguous(`sandbox ${row.id} matches but its token is not readable (root token needed)`, ids);
    let owner = this.baseUrl.replace(/^http:\/\//, "");
    try {
      owner = (await this.info()).advertise_addr || owner;
    } catch {
      // Best effort: the address we reached the node at still routes there.
    }
    this.log?.info({ route: c.route, claimRef: c.claimRef, sandboxId: row.id }, "sandboxd claim adopted from the listing");
    return {
      id: row.id,
      token: detail.token,
      deadline: detail.deadline ?? row.deadline ?? GO_ZERO_TIME,
      owner_addr: owner,
      // Rows do not carry net_route; "relay" is the egress lane's usual route and an inference, flagged by `adopted`.
      net_route: row.key.net === "egress" ? "relay" : "none",
      ...(row.from_checkpoint ? { from_checkpoint: row.from_checkpoint } : {}),
      adopted: true,
    } as ClaimResult;
  }

  // ---------------------------------------------------------------------------------------------------------
  // Lifecycle verbs (§4). Operator path: root token in the header, empty body token.

  /** `POST …/release`. 404 means already gone. `token` overrides the header (e.g. the claim's own token). */
  async release(id: string, o: CallOptions & { token?: string } = {}): Promise<"released" | "already-gone"> {
    try {
      await this.call({ method: "POST", path: `/v1/sandboxes/${enc(id)}/release`, schema: undefined, retry: "safe", token: o.token, ctx: { sandboxId: id }, opts: o });
      return "released";
    } catch (e) {
      if (isNotFound(e)) return "already-gone";
      throw e;
    }
  }

  /** `POST …/renew`: deadline = now + granted TTL (0 → 300 s, clamp 24 h); may shorten. */
  renew(id: string, ttlSeconds: number, o: CallOptions & { token?: string; onExpire?: RenewRequest["on_expire"] } = {}) {
    const body: RenewRequest = { ttl_seconds: ttlSeconds, ...(o.onExpire ? { on_expire: o.onExpire } : {}) };
    return this.call({ method: "POST", path: `/v1/sandboxes/${enc(id)}/renew`, body, schema: RenewReply, retry: "safe", token: o.token, ctx: { sandboxId: id }, opts: o });
  }

  /** `POST …/hibernate` (idempotent). */
  async hibernate(id: string, o: CallOptions & { token?: string } = {}): Promise<void> {
    await this.call({ method: "POST", path: `/v1/sandboxes/${enc(id)}/hibernate`, schema: undefined, retry: "safe", token: o.token, ctx: { sandboxId: id }, opts: o });
  }

  /** `POST …/wake` (idempotent). */
  async wake(id: string, o: CallOptions & { token?: string } = {}): Promise<void> {
    await this.call({ method: "POST", path: `/v1/sandboxes/${enc(id)}/wake`, schema: undefined, retry: "safe", token: o.token, ctx: { sandboxId: id }, opts: o });
  }

  /** `POST …/fork` → the children (all-or-nothing). Follows the claim rule: repeated only when provably undelivered. */
  async fork(id: string, req: ForkRequest, o: CallOptions = {}): Promise<ClaimReply[]> {
    const r = await this.call({ method: "POST", path: `/v1/sandboxes/${enc(id)}/fork`, body: { ...req, token: req.token ?? "" }, schema: ForkReply, retry: "undelivered", ctx: { sandboxId: id }, opts: o });
    return r.children;
  }

  /** `POST …/promote`: re-promoting a name replaces it. */
  promote(id: string, req: PromoteRequest, o: CallOptions = {}) {
    return this.call({ method: "POST", path: `/v1/sandboxes/${enc(id)}/promote`, body: { ...req, token: req.token ?? "" }, schema: PromoteReply, retry: "undelivered", ctx: { sandboxId: id }, opts: o });
  }

  /** `POST …/checkpoint` → the new checkpoint (the source keeps running). */
  async checkpoint(id: string, req: CheckpointRequest = {}, o: CallOptions = {}): Promise<Checkpoint> {
    const r = await this.call({ method: "POST", path: `/v1/sandboxes/${enc(id)}/checkpoint`, body: { ...req, token: req.token ?? "" }, schema: CheckpointReply, retry: "undelivered", ctx: { sandboxId: id }, opts: o });
    return r.checkpoint;
  }

  /** `GET /v1/checkpoints`, newest first. */
  async listCheckpoints(o: CallOptions = {}): Promise<Checkpoint[]> {
    return (await this.call({ method: "GET", path: "/v1/checkpoints", schema: CheckpointList, retry: "safe", opts: o })).checkpoints;
  }

  /** `DELETE /v1/checkpoints/{id}`; 404 means already gone. */
  async deleteCheckpoint(checkpointId: string, o: CallOptions = {}): Promise<"deleted" | "already-gone"> {
    try {
      await this.call({ method: "DELETE", path: `/v1/checkpoints/${enc(checkpointId)}`, schema: undefined, retry: "safe", ctx: { checkpointId }, opts: o });
      return "deleted";
    } catch (e) {
      if (isNotFound(e)) return "already-gone";
      throw e;
    }
  }

  /**
   * `DELETE /v1/templates?template=&net=&size=[&digest=][&no_redirect=1]`; 404 means already gone. On a mesh
   * without `noRedirect` the node may answer `{"redirect":[…]}`: returned for the caller to fan out.
   */
  async deleteTemplate(
    key: { template: string; net?: PoolKey["net"]; size?: PoolKey["size"] },
    o: CallOptions & { digest?: string; noRedirect?: boolean } = {},
  ): Promise<"deleted" | "already-gone" | { redirect: string[] }> {
    const q = templateQuery(key, o.digest);
    if (o.noRedirect) q.set("no_redirect", "1");
    try {
      const raw = await this.call({ method: "DELETE", path: "/v1/templates", query: q, schema: undefined, retry: "safe", opts: o });
      if (raw.status === 200 && raw.body.byteLength > 0) {
        const r = decodeJson(raw.body, RedirectReply, this.ctx("DELETE", "/v1/templates", { status: 200 }));
        return { redirect: r.redirect };
      }
      return "deleted";
    } catch (e) {
      if (isNotFound(e)) return "already-gone";
      throw e;
    }
  }

  /** `PUT /v1/templates/labels` (whole map; `{}` clears). */
  async putTemplateLabels(
    key: { template: string; net?: PoolKey["net"]; size?: PoolKey["size"] },
    labels: Metadata,
    o: CallOptions & { digest?: string } = {},
  ): Promise<void> {
    await this.call({ method: "PUT", path: "/v1/templates/labels", query: templateQuery(key, o.digest), body: { labels }, schema: undefined, retry: "safe", opts: o });
  }

  /** `PUT …/instance-metadata` (root; one JSON object ≤ 4 KiB; idempotent). */
  async putInstanceMetadata(id: string, doc: InstanceMetadata, o: CallOptions = {}): Promise<void> {
    await this.call({ method: "PUT", path: `/v1/sandboxes/${enc(id)}/instance-metadata`, body: doc, schema: undefined, retry: "safe", ctx: { sandboxId: id }, opts: o });
  }

  // ---------------------------------------------------------------------------------------------------------
  // Reads (§5). A failed read THROWS: a failed listing is never an empty listing.

  /** `GET /v1/sandboxes` with its filters. Throws on any failure; never returns [] for an error. */
  async list(filter: ListFilter = {}, o: CallOptions = {}): Promise<SandboxRow[]> {
    const q = new URLSearchParams();
    if (filter.claimRef) q.set("claim_ref", filter.claimRef);
    for (const [k, v] of Object.entries(filter.metadata ?? {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) q.append("metadata", `${k}=${v}`);
    if (filter.tenant) q.set("tenant", filter.tenant);
    return (await this.call({ method: "GET", path: "/v1/sandboxes", query: q, schema: ListReply, retry: "safe", ctx: { claimRef: filter.claimRef }, opts: o })).sandboxes;
  }

  /** `GET /v1/sandboxes/{id}` (root-only). With the root token the row carries the sandbox's own `token`. */
  get(id: string, o: CallOptions = {}): Promise<SandboxDetail> {
    return this.call({ method: "GET", path: `/v1/sandboxes/${enc(id)}`, schema: SandboxDetail, retry: "safe", ctx: { sandboxId: id }, opts: o });
  }

  /** `GET /v1/sandboxes/{id}/stats` (root-only). */
  stats(id: string, o: CallOptions = {}) {
    return this.call({ method: "GET", path: `/v1/sandboxes/${enc(id)}/stats`, schema: Stats, retry: "safe", ctx: { sandboxId: id }, opts: o });
  }

  /** `GET /v1/sandboxes/{id}/owner` with the sandbox's own token; 404 `not owned here` elsewhere. */
  owner(id: string, sandboxToken: string, o: CallOptions = {}) {
    return this.call({ method: "GET", path: `/v1/sandboxes/${enc(id)}/owner`, schema: OwnerReply, retry: "safe", token: sandboxToken, ctx: { sandboxId: id }, opts: o });
  }

  /** `GET /v1/info` (root-only). */
  info(o: CallOptions = {}) {
    return this.call({ method: "GET", path: "/v1/info", schema: Info, retry: "safe", opts: o });
  }

  /** `PUT /v1/pools`: the node's complete desired set (omitted keys are drained). Reply = fresh info. */
  putPools(req: { pools: PoolEntryInput[] }, o: CallOptions = {}) {
    return this.call({ method: "PUT", path: "/v1/pools", body: req, schema: Info, retry: "safe", opts: o });
  }

  /** `POST /v1/drain` (cordon). Reply = info with `draining:true`. */
  drain(o: CallOptions = {}) {
    return this.call({ method: "POST", path: "/v1/drain", schema: Info, retry: "safe", opts: o });
  }

  /** `DELETE /v1/drain` (uncordon). */
  undrain(o: CallOptions = {}) {
    return this.call({ method: "DELETE", path: "/v1/drain", schema: Info, retry: "safe", opts: o });
  }

  /** `GET /v1/peers`. */
  async peers(o: CallOptions = {}): Promise<string[]> {
    return (await this.call({ method: "GET", path: "/v1/peers", schema: PeersReply, retry: "safe", opts: o })).peers;
  }

  /** `GET /metrics` (root): Prometheus text. */
  async metrics(o: CallOptions = {}): Promise<string> {
    const raw = await this.call({ method: "GET", path: "/metrics", schema: undefined, retry: "safe", opts: o });
    return new TextDecoder().decode(raw.body);
  }

  /** `GET /healthz`: resolves on `200`, throws the typed error otherwise. No retries: a probe reports what it sees. */
  async healthz(o: CallOptions = {}): Promise<void> {
    await this.call({ method: "GET", path: "/healthz", schema: undefined, retry: "none", opts: o });
  }

  // ---------------------------------------------------------------------------------------------------------
  // Data-plane URLs (§5.6). The relay itself needs `Upgrade: tcp`; these only name the endpoint.

  /** `GET /v1/sandboxes/{id}/ports/{port}` on this node (dial it with `Upgrade: tcp`). */
  portRelayUrl(id: string, port: number): string {
    if (!Number.isInteger(port) || port < 1 || port > 65535) throw new RangeError(`port must be 1-65535, got ${port}`);
    return `${this.baseUrl}/v1/sandboxes/${enc(id)}/ports/${port}`;
  }

  /** `GET /v1/sandboxes/{id}/agent` on this node (dial it with `Upgrade: silkd`). */
  agentUrl(id: string): string {
    return `${this.baseUrl}/v1/sandboxes/${enc(id)}/agent`;
  }

  // ---------------------------------------------------------------------------------------------------------
  // Plumbing

  private ctx(method: string, path: string, extra?: Partial<SandboxdErrorContext>): SandboxdErrorContext {
    return { ...extra, node: this.baseUrl, route: `${method} ${path}` };
  }

  private exchangeOnce(
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
    // Never log the token or the body (claim bodies may carry env secrets).
    p.then(
      (r) => this.log?.debug({ route: c.route, status: r.status, ms: Math.round(performance.now() - started) }, "sandboxd call"),
      (e: Error) => this.log?.debug({ route: c.route, err: e.message, ms: Math.round(performance.now() - started) }, "sandboxd call failed"),
    );
    return p;
  }

  private call<S extends z.ZodType>(spec: CallSpec<S>): Promise<z.infer<S>>;
  private call(spec: CallSpec<undefined>): Promise<RawReply>;
  private async call(spec: CallSpec<z.ZodType | undefined>): Promise<unknown> {
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

function enc(s: string): string {
  return encodeURIComponent(s);
}

function templateQuery(key: { template: string; net?: string; size?: string }, digest?: string): URLSearchParams {
  const q = new URLSearchParams({ template: key.template, net: key.net ?? DEFAULT_NET, size: key.size ?? DEFAULT_SIZE });
  if (digest) q.set("digest", digest);
  return q;
}

/**
 * The e2b SDK's signed envd file URL signature (envd-proxy.md §9): `"v1_" + base64(sha256(
 * "<path>:<read|write>:<user>:<accessToken>[:<expiry>]"))` without `=` padding. envd verifies it; the relay only
 * recognises the query and opens the node's port relay with the root token (passive).
 */
export function fileSignature(o: { path: string; operation: "read" | "write"; user: string; accessToken: string; expiresAtSeconds?: number }): string {
  const raw = `${o.path}:${o.operation}:${o.user}:${o.accessToken}${o.expiresAtSeconds === undefined ? "" : `:${o.expiresAtSeconds}`}`;
  return `v1_${createHash("sha256").update(raw).digest("base64").replace(/=+$/, "")}`;
}

/** `<envdBase>/files?path=…&username=…&signature=…[&signature_expiration=…]`, as the SDK's download/upload URL. */
export function signedFileUrl(
  envdBase: string,
  o: { path: string; operation: "read" | "write"; user: string; accessToken: string; expiresAtSeconds?: number },
): string {
  const q = new URLSearchParams({ path: o.path, username: o.user, signature: fileSignature(o) });
  if (o.expiresAtSeconds !== undefined) q.set("signature_expiration", String(o.expiresAtSeconds));
  return `${envdBase.replace(/\/+$/, "")}/files?${q.toString()}`;
}
