// Reads and node operations (§5.1–5.5), one function per route over a NodeCaller; SandboxdClient exposes
// them as methods. A failed read THROWS: a failed listing is never an empty listing (§8.8).
import { type CallOptions, type NodeCaller, enc } from "./call.ts";
import {
  type PoolEntryInput,
  type SandboxRow,
  Info,
  ListReply,
  OwnerReply,
  PeersReply,
  SandboxDetail,
  Stats,
} from "./schemas.ts";

export interface ListFilter {
  claimRef?: string;
  metadata?: Record<string, string>;
  tenant?: string;
}

/** `GET /v1/sandboxes` with its filters. Throws on any failure; never returns [] for an error. */
export async function list(n: NodeCaller, filter: ListFilter = {}, o: CallOptions = {}): Promise<SandboxRow[]> {
  const q = new URLSearchParams();
  if (filter.claimRef) q.set("claim_ref", filter.claimRef);
  // Sorted so the same filter is the same URL (logs, caches, request assertions).
  const pairs = Object.entries(filter.metadata ?? {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  for (const [k, v] of pairs) q.append("metadata", `${k}=${v}`);
  if (filter.tenant) q.set("tenant", filter.tenant);
  const r = await n.call({ method: "GET", path: "/v1/sandboxes", query: q, schema: ListReply, retry: "safe", ctx: { claimRef: filter.claimRef }, opts: o });
  return r.sandboxes;
}

/** `GET /v1/sandboxes/{id}` (root-only). With the root token the row carries the sandbox's own `token`. */
export function get(n: NodeCaller, id: string, o: CallOptions = {}): Promise<SandboxDetail> {
  return n.call({ method: "GET", path: `/v1/sandboxes/${enc(id)}`, schema: SandboxDetail, retry: "safe", ctx: { sandboxId: id }, opts: o });
}

/** `GET /v1/sandboxes/{id}/stats` (root-only). */
export function stats(n: NodeCaller, id: string, o: CallOptions = {}) {
  return n.call({ method: "GET", path: `/v1/sandboxes/${enc(id)}/stats`, schema: Stats, retry: "safe", ctx: { sandboxId: id }, opts: o });
}

/** `GET /v1/sandboxes/{id}/owner` with the sandbox's own token; 404 `not owned here` elsewhere. */
export function owner(n: NodeCaller, id: string, sandboxToken: string, o: CallOptions = {}) {
  return n.call({ method: "GET", path: `/v1/sandboxes/${enc(id)}/owner`, schema: OwnerReply, retry: "safe", token: sandboxToken, ctx: { sandboxId: id }, opts: o });
}

/** `GET /v1/info` (root-only). */
export function info(n: NodeCaller, o: CallOptions = {}) {
  return n.call({ method: "GET", path: "/v1/info", schema: Info, retry: "safe", opts: o });
}

/** `PUT /v1/pools`: the node's complete desired set (omitted keys are drained). Reply = fresh info. */
export function putPools(n: NodeCaller, req: { pools: PoolEntryInput[] }, o: CallOptions = {}) {
  return n.call({ method: "PUT", path: "/v1/pools", body: req, schema: Info, retry: "safe", opts: o });
}

/** `POST /v1/drain` (cordon) or `DELETE /v1/drain` (uncordon). Reply = info. */
export function setDrain(n: NodeCaller, draining: boolean, o: CallOptions = {}) {
  return n.call({ method: draining ? "POST" : "DELETE", path: "/v1/drain", schema: Info, retry: "safe", opts: o });
}

/** `GET /v1/peers`. */
export async function peers(n: NodeCaller, o: CallOptions = {}): Promise<string[]> {
  return (await n.call({ method: "GET", path: "/v1/peers", schema: PeersReply, retry: "safe", opts: o })).peers;
}

/** `GET /metrics` (root): Prometheus text. */
export async function metrics(n: NodeCaller, o: CallOptions = {}): Promise<string> {
  const raw = await n.call({ method: "GET", path: "/metrics", schema: undefined, retry: "safe", opts: o });
  return new TextDecoder().decode(raw.body);
}

/** `GET /healthz`: resolves on `200`, throws the typed error otherwise. No retries: a probe reports what it sees. */
export async function healthz(n: NodeCaller, o: CallOptions = {}): Promise<void> {
  await n.call({ method: "GET", path: "/healthz", schema: undefined, retry: "none", opts: o });
}
