// Claiming (§3, §8.4–8.5): never idempotent. The claim and branch-claim routes, the redirect replay, and the
// reconciliation of a reply that may have been lost. SandboxdClient.claim / claimCheckpoint are the public face.
//
// The rules:
// - Nothing here repeats a claim at the same node. A capacity miss (429, 200 without id), a refused connection
//   or `500 provisioning failed` surface as errors for which `provablyUndelivered` is true.
// - After a possibly-delivered failure (timeout or reset once sent, an unusable 200, any other 5xx) we do not
//   re-claim: we list the node by the request's identity (claim_ref, or from_checkpoint for a branch) and adopt
//   only when EXACTLY ONE row matches the key and is unknown to the caller (not in `knownIds`). claim_ref is not
//   unique, so zero or several such rows are a SandboxdAmbiguousClaim listing the candidates: zero may mean
//   "never committed" or "still provisioning" (a cold claim), several means we cannot tell ours from another
//   claimer's. We release nothing we cannot prove is ours; the TTL bounds any leak and the caller's orphan audit
//   finds it. A lone unknown row is adopted even if it predates this send (no time window: node and caller
//   clocks need not agree): it carries our claim_ref and key, so it is a VM claimed for the same object that
//   nobody holds, and adopting it beats leaking it. The adopted reply carries the row's real deadline. This is
//   only sound when one caller claims per claim_ref at a time (vk-sandbox: one pod key; the apiserver: one
//   object name) — pass `knownIds` for the rest. Adoption reads the token with `GET /v1/sandboxes/{id}`, which
//   needs the root token; without it the claim is ambiguous too.
// - A redirect replays the identical body with `no_redirect:true` (+ `require_promoted` when carried) at each
//   target in order: an undelivered answer moves on, any other error stops, unknown targets are skipped, a 401 at
//   a target falls back to the origin (no_redirect), one hop only, and running out of targets is a capacity miss
//   (SandboxdRedirect, exhausted).
import type { CallOptions, NodeCaller } from "./call.ts";
import { enc } from "./call.ts";
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
  provablyUndelivered,
} from "./errors.ts";
import { type RawReply, parseJson, statusError, validate } from "./http.ts";
import { get, info, list, type ListFilter } from "./reads.ts";
import {
  type CheckpointClaimRequest,
  type ClaimRequest,
  type SandboxDetail,
  type SandboxRow,
  ClaimReply,
  DEFAULT_NET,
  DEFAULT_SIZE,
  GO_ZERO_TIME,
  RedirectReply,
  inferNetRoute,
} from "./schemas.ts";

/** A cold claim (unpooled key) may block for the node's 90 s cold-probe window; pass this as `timeoutMs`. */
export const COLD_CLAIM_TIMEOUT_MS = 95_000;

/** What the claim path needs of a node's client (SandboxdClient provides it): its plumbing, and its peers. */
export interface ClaimNode {
  readonly caller: NodeCaller;
  forAddress(address: string): ClaimNode;
}

export interface ClaimOptions extends CallOptions {
  /** Follow a `{"redirect":[…]}` reply (one hop). Default true; false throws SandboxdRedirect. */
  followRedirects?: boolean;
  /** Map a redirect target address to a client, or undefined to skip an unknown target. Default: trust it. */
  resolveTarget?: (addr: string) => ClaimNode | undefined;
  /** Ids the caller already holds for this claim_ref; reconciliation never adopts them. */
  knownIds?: Iterable<string>;
  /** Reconcile a possibly-delivered claim by listing (default true). False throws SandboxdAmbiguousClaim at once. */
  reconcile?: boolean;
}

/** A claim reply; `adopted` is set when it was rebuilt from the listing after the node's reply was lost. */
export type ClaimResult = ClaimReply & { adopted?: true };

/** How to find "our" sandbox in a listing after a claim-style reply was lost. */
interface Reconciler {
  filter: ListFilter;
  matches: (row: SandboxRow) => boolean;
}

/** `POST /v1/claim`. Reconciled by claim_ref + key; without a claim_ref a lost reply is simply ambiguous. */
export function claim(node: ClaimNode, req: ClaimRequest, o: ClaimOptions = {}): Promise<ClaimResult> {
  const key = { template: req.template, net: req.net ?? DEFAULT_NET, size: req.size ?? DEFAULT_SIZE };
  const rec: Reconciler | undefined =
    req.claim_ref === undefined || req.claim_ref === ""
      ? undefined
      : {
          filter: { claimRef: req.claim_ref },
          matches: (r) => r.key.template === key.template && r.key.net === key.net && r.key.size === key.size,
        };
  return claimLike(node, "/v1/claim", req, { claimRef: req.claim_ref }, rec, o);
}

/** `POST /v1/checkpoints/{id}/claim`: a branch claim; same rules, reconciled by `from_checkpoint`. */
export function claimCheckpoint(node: ClaimNode, checkpointId: string, req: CheckpointClaimRequest = {}, o: ClaimOptions = {}): Promise<ClaimResult> {
  const rec: Reconciler = {
    filter: { claimRef: req.claim_ref, metadata: req.metadata },
    matches: (r) => r.from_checkpoint === checkpointId,
  };
  return claimLike(node, `/v1/checkpoints/${enc(checkpointId)}/claim`, req, { checkpointId }, rec, o);
}

async function claimLike(
  node: ClaimNode,
  path: string,
  body: ClaimRequest | CheckpointClaimRequest,
  ctx: Partial<SandboxdErrorContext>,
  rec: Reconciler | undefined,
  o: ClaimOptions,
): Promise<ClaimResult> {
  const reply = await claimOnce(node.caller, path, body, ctx, rec, o);
  if (!("redirect" in reply)) return reply;

  const c = node.caller.ctx("POST", path, ctx);
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
    const client = o.resolveTarget ? o.resolveTarget(target) : node.forAddress(target);
    if (client === undefined) {
      attempts.push({ target, outcome: "skipped" });
      continue;
    }
    try {
      return await claimLike(client, path, replay, ctx, rec, hop);
    } catch (e) {
      if (e instanceof SandboxdUnauthorized) {
        // The target does not know our token (token-set rotation in progress): let the origin serve locally.
        node.caller.log?.warn({ route: c.route, target }, "sandboxd redirect target refused our token; claiming at the origin");
        return await claimLike(node, path, replay, ctx, rec, hop);
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
async function claimOnce(
  n: NodeCaller,
  path: string,
  body: ClaimRequest | CheckpointClaimRequest,
  ctxExtra: Partial<SandboxdErrorContext>,
  rec: Reconciler | undefined,
  o: ClaimOptions,
): Promise<ClaimReply | RedirectReply> {
  const c = n.ctx("POST", path, ctxExtra);
  let raw: RawReply;
  try {
    raw = await n.exchangeOnce("POST", path, undefined, body, c, o, n.token);
  } catch (e) {
    // A reset or timeout once sent, or an oversize 200: the node may have handed a VM out.
    if (e instanceof SandboxdTransport && e.delivered === "maybe") return reconcile(n, e, c, rec, o);
    if (e instanceof SandboxdProtocol) return reconcile(n, e, c, rec, o);
    throw e;
  }
  if (raw.status < 200 || raw.status >= 300) {
    const err = statusError(raw, c);
    if (err instanceof SandboxdServerError && !err.provisioningFailed) return reconcile(n, err, c, rec, o);
    throw err;
  }
  const okCtx = { ...c, status: raw.status };
  let v: unknown;
  try {
    v = parseJson(raw.body, okCtx);
  } catch (e) {
    return reconcile(n, e as SandboxdProtocol, c, rec, o);
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
    return reconcile(n, e as SandboxdProtocol, c, rec, o);
  }
}

async function reconcile(n: NodeCaller, cause: Error, c: SandboxdErrorContext, rec: Reconciler | undefined, o: ClaimOptions): Promise<ClaimResult> {
  const ambiguous = (why: string, candidates: string[] = [], extra?: unknown) =>
    new SandboxdAmbiguousClaim(`sandboxd ${c.route} on ${c.node}: claim may have been handed out (${cause.message}); ${why}`, c, {
      candidates,
      cause: extra === undefined ? cause : new AggregateError([cause, extra], why),
    });
  if (rec === undefined) throw ambiguous("no claim_ref to reconcile by");
  if (o.reconcile === false) throw ambiguous("reconciliation disabled by the caller");
  // Reconcile without the caller's signal: an abort already cost us the reply, not the right to look.
  let rows: SandboxRow[];
  try {
    rows = await list(n, rec.filter);
  } catch (e) {
    throw ambiguous("and the node could not be listed to reconcile", [], e);
  }
  const known = new Set(o.knownIds ?? []);
  const candidates = rows.filter((r) => !known.has(r.id) && rec.matches(r));
  const ids = candidates.map((r) => r.id);
  n.log?.warn({ route: c.route, claimRef: c.claimRef, candidates: ids, err: cause.message }, "sandboxd claim reply lost; reconciling by listing");
  if (candidates.length !== 1) {
    throw ambiguous(candidates.length === 0 ? "no matching sandbox is listed (yet)" : "several matching sandboxes are listed", ids);
  }
  const row = candidates[0] as SandboxRow;
  let detail: SandboxDetail;
  try {
    detail = await get(n, row.id);
  } catch (e) {
    throw ambiguous(`sandbox ${row.id} matches but could not be read back`, ids, e);
  }
  if (!detail.token) throw ambiguous(`sandbox ${row.id} matches but its token is not readable (root token needed)`, ids);
  let owner = n.baseUrl.replace(/^http:\/\//, "");
  try {
    owner = (await info(n)).advertise_addr || owner;
  } catch {
    // Best effort: the address we reached the node at still routes there.
  }
  n.log?.info({ route: c.route, claimRef: c.claimRef, sandboxId: row.id }, "sandboxd claim adopted from the listing");
  return {
    id: row.id,
    token: detail.token,
    deadline: detail.deadline ?? row.deadline ?? GO_ZERO_TIME,
    owner_addr: owner,
    // Rows do not carry net_route: inferred from the lane, and flagged as rebuilt by `adopted`.
    net_route: inferNetRoute(row.key.net),
    ...(row.from_checkpoint ? { from_checkpoint: row.from_checkpoint } : {}),
    adopted: true,
  };
}
