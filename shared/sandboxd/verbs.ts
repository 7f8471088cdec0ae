// Lifecycle verbs, checkpoints, templates and preview (§4, §5.6), one function per route over a NodeCaller;
// SandboxdClient exposes them as methods. Operator path: root token in the header, empty body token (§8.1).
// Release and the deletes read 404 as "already gone" (§8.7); fork, promote and checkpoint create something,
// so they are repeated only when nothing reached the node (the claim rule, §8.6).
import { type CallOptions, type NodeCaller, enc, goneOn404, templateQuery } from "./call.ts";
import { decodeJson } from "./http.ts";
import {
  type CheckpointRequest,
  type ForkRequest,
  type InstanceMetadata,
  type Metadata,
  type PoolKey,
  type PromoteRequest,
  type RenewRequest,
  Checkpoint,
  CheckpointList,
  CheckpointReply,
  ClaimReply,
  ForkReply,
  type PreviewRequest,
  PreviewReply,
  PromoteReply,
  RedirectReply,
  RenewReply,
} from "./schemas.ts";

/** A call that may present the sandbox's own token instead of the client's (root) token. */
export type TokenCallOptions = CallOptions & { token?: string };
export type TemplateKey = { template: string; net?: PoolKey["net"]; size?: PoolKey["size"] };

const sandboxPath = (id: string, verb: string) => `/v1/sandboxes/${enc(id)}/${verb}`;

/** `POST …/release`. 404 means already gone. */
export function release(n: NodeCaller, id: string, o: TokenCallOptions = {}): Promise<"released" | "already-gone"> {
  return goneOn404("released", () =>
    n.call({ method: "POST", path: sandboxPath(id, "release"), schema: undefined, retry: "safe", token: o.token, ctx: { sandboxId: id }, opts: o }),
  );
}

/** `POST …/renew`: deadline = now + granted TTL (0 → 300 s, clamp 24 h); may shorten. */
export function renew(n: NodeCaller, id: string, ttlSeconds: number, o: TokenCallOptions & { onExpire?: RenewRequest["on_expire"] } = {}) {
  const body: RenewRequest = { ttl_seconds: ttlSeconds, ...(o.onExpire ? { on_expire: o.onExpire } : {}) };
  return n.call({ method: "POST", path: sandboxPath(id, "renew"), body, schema: RenewReply, retry: "safe", token: o.token, ctx: { sandboxId: id }, opts: o });
}

/** `POST …/hibernate` or `POST …/wake`: both idempotent, 204. */
export async function pauseOrWake(n: NodeCaller, id: string, verb: "hibernate" | "wake", o: TokenCallOptions = {}): Promise<void> {
  await n.call({ method: "POST", path: sandboxPath(id, verb), schema: undefined, retry: "safe", token: o.token, ctx: { sandboxId: id }, opts: o });
}

/** `POST …/fork` → the children (all-or-nothing). */
export async function fork(n: NodeCaller, id: string, req: ForkRequest, o: CallOptions = {}): Promise<ClaimReply[]> {
  const body = { ...req, token: req.token ?? "" };
  const r = await n.call({ method: "POST", path: sandboxPath(id, "fork"), body, schema: ForkReply, retry: "undelivered", ctx: { sandboxId: id }, opts: o });
  return r.children;
}

/** `POST …/promote`: re-promoting a name replaces it. */
export function promote(n: NodeCaller, id: string, req: PromoteRequest, o: CallOptions = {}) {
  const body = { ...req, token: req.token ?? "" };
  return n.call({ method: "POST", path: sandboxPath(id, "promote"), body, schema: PromoteReply, retry: "undelivered", ctx: { sandboxId: id }, opts: o });
}

/** `POST …/checkpoint` → the new checkpoint (the source keeps running). */
export async function checkpoint(n: NodeCaller, id: string, req: CheckpointRequest = {}, o: CallOptions = {}): Promise<Checkpoint> {
  const body = { ...req, token: req.token ?? "" };
  const r = await n.call({ method: "POST", path: sandboxPath(id, "checkpoint"), body, schema: CheckpointReply, retry: "undelivered", ctx: { sandboxId: id }, opts: o });
  return r.checkpoint;
}

/**
 * `POST …/preview` → `{url}`. The body token is the sandbox's own and is required (no operator path); the header
 * carries the client's node token. Minting a signed URL changes no node state, so it is a safe retry. A node
 * without a preview listener answers 501 (SandboxdServerError, status 501, not retried).
 */
export function preview(n: NodeCaller, id: string, req: PreviewRequest, o: CallOptions = {}): Promise<PreviewReply> {
  const body: PreviewRequest = { token: req.token, port: req.port, ...(req.ttl_seconds === undefined ? {} : { ttl_seconds: req.ttl_seconds }) };
  return n.call({ method: "POST", path: sandboxPath(id, "preview"), body, schema: PreviewReply, retry: "safe", ctx: { sandboxId: id }, opts: o });
}

/** `GET /v1/checkpoints`, newest first. */
export async function listCheckpoints(n: NodeCaller, o: CallOptions = {}): Promise<Checkpoint[]> {
  return (await n.call({ method: "GET", path: "/v1/checkpoints", schema: CheckpointList, retry: "safe", opts: o })).checkpoints;
}

/** `DELETE /v1/checkpoints/{id}`; 404 means already gone. */
export function deleteCheckpoint(n: NodeCaller, checkpointId: string, o: CallOptions = {}): Promise<"deleted" | "already-gone"> {
  return goneOn404("deleted", () =>
    n.call({ method: "DELETE", path: `/v1/checkpoints/${enc(checkpointId)}`, schema: undefined, retry: "safe", ctx: { checkpointId }, opts: o }),
  );
}

/**
 * `DELETE /v1/templates?template=&net=&size=[&digest=][&no_redirect=1]`; 404 means already gone. On a mesh
 * without `noRedirect` the node may answer `{"redirect":[…]}`: returned for the caller to fan out.
 */
export async function deleteTemplate(
  n: NodeCaller,
  key: TemplateKey,
  o: CallOptions & { digest?: string; noRedirect?: boolean } = {},
): Promise<"deleted" | "already-gone" | { redirect: string[] }> {
  const q = templateQuery(key, o.digest);
  if (o.noRedirect) q.set("no_redirect", "1");
  let redirect: string[] | undefined;
  const outcome = await goneOn404("deleted", async () => {
    const raw = await n.call({ method: "DELETE", path: "/v1/templates", query: q, schema: undefined, retry: "safe", opts: o });
    if (raw.status === 200 && raw.body.byteLength > 0) {
      redirect = decodeJson(raw.body, RedirectReply, n.ctx("DELETE", "/v1/templates", { status: 200 })).redirect;
    }
  });
  return redirect === undefined ? outcome : { redirect };
}

/** `PUT /v1/templates/labels` (whole map; `{}` clears). */
export async function putTemplateLabels(n: NodeCaller, key: TemplateKey, labels: Metadata, o: CallOptions & { digest?: string } = {}): Promise<void> {
  const q = templateQuery(key, o.digest);
  await n.call({ method: "PUT", path: "/v1/templates/labels", query: q, body: { labels }, schema: undefined, retry: "safe", opts: o });
}

/** `PUT …/instance-metadata` (root; one JSON object ≤ 4 KiB; idempotent). */
export async function putInstanceMetadata(n: NodeCaller, id: string, doc: InstanceMetadata, o: CallOptions = {}): Promise<void> {
  await n.call({ method: "PUT", path: sandboxPath(id, "instance-metadata"), body: doc, schema: undefined, retry: "safe", ctx: { sandboxId: id }, opts: o });
}
