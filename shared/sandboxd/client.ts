// The one typed sandboxd client every binary uses (sandboxd §8 "Client requirements"; docs/spec-sections.md).
// One instance talks to one node. This class is the public face; the routes live beside it by responsibility:
//   claim.ts  claim / branch claim, redirect replay, reconciliation of a lost reply (never idempotent)
//   verbs.ts  lifecycle verbs, checkpoints, templates, instance metadata, preview
//   reads.ts  listing, per-sandbox reads, info, pools, drain, peers, metrics, healthz
//   urls.ts   relay and signed-file URLs (no call)
//   call.ts   NodeCaller: exchange + error mapping + decoding + per-route retry rule (over http.ts)
// Wire types come from ./schemas.ts; failures are the typed classes of ./errors.ts.
import type { Logger } from "pino";
import { type CallOptions, NodeCaller } from "./call.ts";
import { type ClaimOptions, type ClaimResult, claim as claimOn, claimCheckpoint as claimCheckpointOn } from "./claim.ts";
import { DEFAULT_RETRY, DEFAULT_TIMEOUT_MS, type RetryPolicy } from "./http.ts";
import * as reads from "./reads.ts";
import type { ListFilter } from "./reads.ts";
import type {
  CheckpointClaimRequest,
  CheckpointRequest,
  ClaimRequest,
  ForkRequest,
  InstanceMetadata,
  Metadata,
  PoolEntryInput,
  PreviewRequest,
  PromoteRequest,
  RenewRequest,
} from "./schemas.ts";
import { agentUrl, portRelayUrl } from "./urls.ts";
import * as verbs from "./verbs.ts";
import type { TemplateKey, TokenCallOptions } from "./verbs.ts";

export type { CallOptions } from "./call.ts";
export { COLD_CLAIM_TIMEOUT_MS, type ClaimNode, type ClaimOptions, type ClaimResult } from "./claim.ts";
export type { ListFilter } from "./reads.ts";
export { fileSignature, signedFileUrl, type FileSignatureInput } from "./urls.ts";

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

export class SandboxdClient {
  readonly baseUrl: string;
  /** The plumbing the route modules share (claim.ts needs it on redirect targets). Not for callers. */
  readonly caller: NodeCaller;
  /** The caller's logger, unbound, so clients derived for redirect targets bind their own node. */
  private readonly rootLog: Logger | undefined;

  /** No side effects: nothing is dialled until the first call. */
  constructor(o: SandboxdClientOptions) {
    this.baseUrl = o.baseUrl.replace(/\/+$/, "");
    this.rootLog = o.log;
    this.caller = new NodeCaller({
      baseUrl: this.baseUrl,
      token: o.token ?? "",
      log: o.log?.child({ sandboxd: this.baseUrl }),
      timeoutMs: o.timeoutMs ?? DEFAULT_TIMEOUT_MS,
      fetch: o.fetch ?? fetch,
      retry: { ...DEFAULT_RETRY, ...o.retry },
    });
  }

  /** An inventory address (`host:port`) or a full origin → base URL: `http://` only when there is no `://`. */
  static baseUrlFor(address: string): string {
    const a = address.trim().replace(/\/+$/, "");
    return a.includes("://") ? a : `http://${a}`;
  }

  /** A client for another node with the same credentials and settings (redirect targets). */
  forAddress(address: string): SandboxdClient {
    const c = this.caller;
    return new SandboxdClient({
      baseUrl: SandboxdClient.baseUrlFor(address),
      token: c.token,
      log: this.rootLog,
      timeoutMs: c.timeoutMs,
      fetch: c.fetchImpl,
      retry: c.retry,
    });
  }

  // Claiming (§3; claim.ts) ----------------------------------------------------------------------------------

  /**
   * `POST /v1/claim`. Always send a `claim_ref`: it is what a lost reply is reconciled by. Throws
   * SandboxdCapacity / SandboxdRedirect (nothing handed out, try elsewhere), SandboxdAmbiguousClaim (maybe
   * handed out, could not be pinned down), or the node's typed error. A reply without `net_route` (older
   * nodes) is an ordinary claim; `inferNetRoute(req.net)` gives the usual value.
   */
  claim(req: ClaimRequest, o: ClaimOptions = {}): Promise<ClaimResult> {
    return claimOn(this, req, o);
  }

  /** `POST /v1/checkpoints/{id}/claim`: a branch claim; same rules as {@link claim}, reconciled by `from_checkpoint`. */
  claimCheckpoint(checkpointId: string, req: CheckpointClaimRequest = {}, o: ClaimOptions = {}): Promise<ClaimResult> {
    return claimCheckpointOn(this, checkpointId, req, o);
  }

  // Lifecycle verbs (§4; verbs.ts). `token` overrides the header (e.g. the claim's own token). ---------------

  /** `POST …/release`. 404 means already gone. */
  release(id: string, o: TokenCallOptions = {}): Promise<"released" | "already-gone"> {
    return verbs.release(this.caller, id, o);
  }
  /** `POST …/renew`: deadline = now + granted TTL (0 → 300 s, clamp 24 h); may shorten. */
  renew(id: string, ttlSeconds: number, o: TokenCallOptions & { onExpire?: RenewRequest["on_expire"] } = {}) {
    return verbs.renew(this.caller, id, ttlSeconds, o);
  }
  /** `POST …/hibernate` (idempotent). */
  hibernate(id: string, o: TokenCallOptions = {}): Promise<void> {
    return verbs.pauseOrWake(this.caller, id, "hibernate", o);
  }
  /** `POST …/wake` (idempotent). */
  wake(id: string, o: TokenCallOptions = {}): Promise<void> {
    return verbs.pauseOrWake(this.caller, id, "wake", o);
  }
  /** `POST …/fork` → the children (all-or-nothing). Repeated only when provably undelivered. */
  fork(id: string, req: ForkRequest, o: CallOptions = {}) {
    return verbs.fork(this.caller, id, req, o);
  }
  /** `POST …/promote`: re-promoting a name replaces it. */
  promote(id: string, req: PromoteRequest, o: CallOptions = {}) {
    return verbs.promote(this.caller, id, req, o);
  }
  /** `POST …/checkpoint` → the new checkpoint (the source keeps running). */
  checkpoint(id: string, req: CheckpointRequest = {}, o: CallOptions = {}) {
    return verbs.checkpoint(this.caller, id, req, o);
  }
  /** `GET /v1/checkpoints`, newest first. */
  listCheckpoints(o: CallOptions = {}) {
    return verbs.listCheckpoints(this.caller, o);
  }
  /** `DELETE /v1/checkpoints/{id}`; 404 means already gone. */
  deleteCheckpoint(checkpointId: string, o: CallOptions = {}) {
    return verbs.deleteCheckpoint(this.caller, checkpointId, o);
  }
  /** `DELETE /v1/templates…`; 404 means already gone; on a mesh a `{redirect}` is returned for the caller to fan out. */
  deleteTemplate(key: TemplateKey, o: CallOptions & { digest?: string; noRedirect?: boolean } = {}) {
    return verbs.deleteTemplate(this.caller, key, o);
  }
  /** `PUT /v1/templates/labels` (whole map; `{}` clears). */
  putTemplateLabels(key: TemplateKey, labels: Metadata, o: CallOptions & { digest?: string } = {}): Promise<void> {
    return verbs.putTemplateLabels(this.caller, key, labels, o);
  }
  /** `PUT …/instance-metadata` (root; one JSON object ≤ 4 KiB; idempotent). */
  putInstanceMetadata(id: string, doc: InstanceMetadata, o: CallOptions = {}): Promise<void> {
    return verbs.putInstanceMetadata(this.caller, id, doc, o);
  }

  // Reads and node operations (§5; reads.ts). A failed read THROWS: a failed listing is never an empty one. --

  /** `GET /v1/sandboxes` with its filters. */
  list(filter: ListFilter = {}, o: CallOptions = {}) {
    return reads.list(this.caller, filter, o);
  }
  /** `GET /v1/sandboxes/{id}` (root-only). With the root token the row carries the sandbox's own `token`. */
  get(id: string, o: CallOptions = {}) {
    return reads.get(this.caller, id, o);
  }
  /** `GET /v1/sandboxes/{id}/stats` (root-only). */
  stats(id: string, o: CallOptions = {}) {
    return reads.stats(this.caller, id, o);
  }
  /** `GET /v1/sandboxes/{id}/owner` with the sandbox's own token; 404 `not owned here` elsewhere. */
  owner(id: string, sandboxToken: string, o: CallOptions = {}) {
    return reads.owner(this.caller, id, sandboxToken, o);
  }
  /** `GET /v1/info` (root-only). */
  info(o: CallOptions = {}) {
    return reads.info(this.caller, o);
  }
  /** `PUT /v1/pools`: the node's complete desired set (omitted keys are drained). Reply = fresh info. */
  putPools(req: { pools: PoolEntryInput[] }, o: CallOptions = {}) {
    return reads.putPools(this.caller, req, o);
  }
  /** `POST /v1/drain` (cordon). Reply = info with `draining:true`. */
  drain(o: CallOptions = {}) {
    return reads.setDrain(this.caller, true, o);
  }
  /** `DELETE /v1/drain` (uncordon). */
  undrain(o: CallOptions = {}) {
    return reads.setDrain(this.caller, false, o);
  }
  /** `GET /v1/peers`. */
  peers(o: CallOptions = {}) {
    return reads.peers(this.caller, o);
  }
  /** `GET /metrics` (root): Prometheus text. */
  metrics(o: CallOptions = {}) {
    return reads.metrics(this.caller, o);
  }
  /** `GET /healthz`: resolves on `200`, throws the typed error otherwise. No retries. */
  healthz(o: CallOptions = {}) {
    return reads.healthz(this.caller, o);
  }

  // Data plane (§5.6) ------------------------------------------------------------------------------------------

  /** `POST …/preview` → `{url}`: node token in the header, the sandbox's own token in the body (required). */
  preview(id: string, req: PreviewRequest, o: CallOptions = {}) {
    return verbs.preview(this.caller, id, req, o);
  }
  /**
   * The URL of a preview: a browser URL serving guest `port` of sandbox `id` until it expires (clamped by the node
   * to the claim's lease; `ttlSeconds` ≤ 0 or absent takes the node's default). Mint it on the sandbox's owner.
   */
  async previewUrl(id: string, sandboxToken: string, port: number, o: CallOptions & { ttlSeconds?: number } = {}): Promise<string> {
    const req: PreviewRequest = { token: sandboxToken, port, ...(o.ttlSeconds === undefined ? {} : { ttl_seconds: o.ttlSeconds }) };
    return (await this.preview(id, req, o)).url;
  }
  /** `GET /v1/sandboxes/{id}/ports/{port}` on this node (dial it with `Upgrade: tcp`). */
  portRelayUrl(id: string, port: number): string {
    return portRelayUrl(this.baseUrl, id, port);
  }
  /** `GET /v1/sandboxes/{id}/agent` on this node (dial it with `Upgrade: silkd`). */
  agentUrl(id: string): string {
    return agentUrl(this.baseUrl, id);
  }
}
