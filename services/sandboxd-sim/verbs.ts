// sandboxd-sim — development substrate standing in for sandboxd (which needs KVM). Not product code.
//
// The verbs that create claims or artefacts: claim, checkpoint claim, fork, promote, checkpoint. Inside a node a
// claim goes: redirect if eligible (mesh only, no_redirect false) -> capacity (429 texts) -> promoted clone, or
// warm pop (newest first), or a local provision -> the claim table -> kick the refill loop.
import { SimError, conflict } from "./errors.ts";
import { newLease, type Claim } from "./claims.ts";
import { capacityProblem, checkCapacity } from "./capacity.ts";
import { checkpointOwners, claimRedirect } from "./mesh.ts";
import type { Scope } from "./auth.ts";
import type { SimNode, CheckpointRec } from "./node.ts";
import {
  DEFAULT_NET,
  DEFAULT_SIZE,
  NAME_RE,
  poolKeyString,
  toWireTime,
  type ClaimReply,
  type ClaimRequest,
  type CheckpointClaimRequest,
  type ClaimResponse,
  type Checkpoint,
  type ForkRequest,
  type OnExpire,
  type PoolKey,
  type PromoteReply,
} from "#shared/sandboxd/index.ts";

const tenantOf = (s: Scope) => (s.kind === "tenant" ? s.tenant : undefined);

export function claimReply(node: SimNode, c: Claim): ClaimReply {
  const r: ClaimReply = {
    id: c.id,
    token: c.token,
    deadline: toWireTime(c.deadline ?? node.clock.now()),
    owner_addr: node.addr,
    // net=none guests are reachable only through the ports relay; the egress lane routes via the node's relay.
    net_route: c.key.net === "egress" ? "relay" : "none",
  };
  if (c.templateDigest) r.template_digest = c.templateDigest;
  if (c.fromCheckpoint) r.from_checkpoint = c.fromCheckpoint;
  return r;
}

interface GrantSpec {
  key: PoolKey;
  tenant: string | undefined;
  ttl?: number;
  claimRef?: string;
  metadata?: Record<string, string>;
  onExpire?: OnExpire;
  fromCheckpoint?: string;
  /** A fork child never pops a warm VM: it is a clone of its parent. */
  fresh?: boolean;
  forkedFrom?: string;
}

/** Provision (or pop) and record one claim. Capacity must already have been checked by the caller. */
function grant(node: SimNode, s: GrantSpec): Claim {
  const now = node.clock.now();
  const promoted = node.templateFor(s.key);
  let vm = !s.fresh && !promoted ? node.pools.pop(s.key) : undefined;
  let tier = "warm";
  if (!vm) {
    // A local provision (golden clone, or a cold boot for an unpooled key) fails when the key is set to fail
    // or when the node cannot start another VM at all (at capacity).
    if (node.pools.fails(s.key) || node.pools.atCapacityReason !== undefined) throw new SimError(500, "provisioning failed");
    vm = node.pools.mint();
    tier = promoted || node.pools.get(s.key)?.golden ? "clone" : "cold";
  }
  const lease = newLease(now, s.ttl);
  const c: Claim = {
    id: vm.id,
    token: vm.token,
    key: { ...s.key },
    tenant: s.tenant,
    claimRef: s.claimRef || undefined,
    metadata: s.metadata && Object.keys(s.metadata).length ? { ...s.metadata } : undefined,
    onExpire: s.onExpire ?? "destroy",
    onExpireSet: s.onExpire !== undefined,
    grantedTtlSeconds: lease.granted,
    deadline: lease.deadline,
    claimedAt: now,
    state: "running",
    restarts: 0,
    fromCheckpoint: s.fromCheckpoint,
    forkedFrom: s.forkedFrom,
    templateDigest: promoted?.contentDigest,
    lastActivity: now,
  };
  node.table.add(c);
  node.count(`claims_total{tier="${tier}"}`);
  return c;
}

/** The shared tail of a claim and a branch claim: capacity (the 429 texts), then one grant from the request body. */
function admitAndGrant(
  node: SimNode,
  tenant: string | undefined,
  key: PoolKey,
  req: ClaimRequest | CheckpointClaimRequest,
  extra: Pick<GrantSpec, "fromCheckpoint" | "fresh"> = {},
): Claim {
  checkCapacity(node.capacityState(), node.tokens, node.table, tenant);
  return grant(node, { key, tenant, ttl: req.ttl_seconds, claimRef: req.claim_ref, metadata: req.metadata, onExpire: req.on_expire, ...extra });
}

function laneChecks(node: SimNode, key: PoolKey, onExpire: OnExpire | undefined): void {
  if (key.net === "egress" && !node.egressAttachment) throw conflict("egress lane not available on this node");
  if (key.net === "egress" && onExpire === "archive") throw conflict("on_expire archive is not supported on the egress lane");
}

export function claim(node: SimNode, scope: Scope, req: ClaimRequest): ClaimResponse {
  const key: PoolKey = { template: req.template, net: req.net ?? DEFAULT_NET, size: req.size ?? DEFAULT_SIZE };
  if (req.volumes && req.volumes.length > 0) throw new SimError(400, "volumes are not supported by sandboxd-sim");
  laneChecks(node, key, req.on_expire);
  const tenant = tenantOf(scope);
  const requirePromoted = req.require_promoted === true;
  if (!req.no_redirect) {
    const refused = capacityProblem(node.capacityState(), node.tokens, node.table, tenant) !== null;
    const r = claimRedirect(node, key, { requirePromoted, refused });
    if (r) return r;
  }
  if (requirePromoted && !node.templateFor(key)) throw new SimError(404, "unknown template");
  const c = admitAndGrant(node, tenant, key, req);
  node.pools.refill(); // every claim kicks the refill loop
  return claimReply(node, c);
}

export function checkpointClaim(node: SimNode, scope: Scope, id: string, req: CheckpointClaimRequest): ClaimResponse {
  const ck = node.checkpoints.get(id);
  if (!ck) {
    if (!req.no_redirect) {
      const owners = checkpointOwners(node, id);
      if (owners.length) return { redirect: owners };
    }
    throw new SimError(404, "unknown checkpoint");
  }
  laneChecks(node, ck.key, req.on_expire);
  // A branch is a clone of the checkpoint: it never pops a warm VM.
  const c = admitAndGrant(node, tenantOf(scope), ck.key, req, { fromCheckpoint: ck.id, fresh: true });
  return claimReply(node, c);
}

/** The source of a fork/promote/checkpoint may not be an egress-lane or archived sandbox. */
function sourceChecks(c: Claim, verb: string): void {
  if (c.key.net === "egress") throw conflict(`cannot ${verb} an egress-lane sandbox`);
  if (c.state === "archived") throw conflict(`cannot ${verb} an archived sandbox`);
}

/** A claim whose tenant was removed cannot extend itself with its own token (root still can). */
export function removedTenantCheck(node: SimNode, c: Claim, operator: boolean): void {
  if (!operator && c.tenant !== undefined && !node.tokens.tenants.has(c.tenant)) throw new SimError(403, "tenant removed");
}

export function fork(node: SimNode, parent: Claim, operator: boolean, req: ForkRequest): { children: ClaimReply[] } {
  if (req.count < 1 || req.count > node.maxForkCount) throw new SimError(400, `count must be 1-${node.maxForkCount}`);
  sourceChecks(parent, "fork");
  removedTenantCheck(node, parent, operator);
  // Children count against the parent's tenant, whoever calls; the whole batch must fit.
  checkCapacity(node.capacityState(), node.tokens, node.table, parent.tenant, req.count);
  const onExpire = req.on_expire ?? (parent.onExpireSet ? parent.onExpire : undefined);
  const children: ClaimReply[] = [];
  for (let i = 0; i < req.count; i++) {
    const c = grant(node, {
      key: parent.key,
      tenant: parent.tenant,
      ttl: req.ttl_seconds,
      metadata: parent.metadata,
      onExpire,
      fresh: true,
      forkedFrom: parent.id,
    });
    if (req.claim_ref_prefix) c.claimRef = req.claim_ref_prefix + c.id;
    children.push(claimReply(node, c));
  }
  node.count("forks_total");
  return { children };
}

export function promote(node: SimNode, src: Claim, scope: Scope, name: string): PromoteReply {
  if (!NAME_RE.test(name)) throw new SimError(400, "invalid template name");
  sourceChecks(src, "promote");
  if (node.pools.all().some((p) => p.key.template === name)) throw conflict("template name is a configured pool");
  const key: PoolKey = { template: name, net: src.key.net, size: src.key.size };
  // Creations are stamped with the calling tenant (sandboxd.md §2.1); root's are unowned. Fork is the exception.
  const owner = tenantOf(scope);
  const existing = node.templateFor(key);
  if (existing && existing.tenant !== owner) throw conflict("template owned by another tenant");
  const rec = { key, contentDigest: node.ids.digest(), tenant: owner, createdAt: node.clock.now(), labels: {}, sourceId: src.id };
  node.templates.set(poolKeyString(key), rec);
  node.count("promotes_total");
  return { key, content_digest: rec.contentDigest };
}

export function checkpointOut(ck: CheckpointRec): Checkpoint {
  const out: Checkpoint = { id: ck.id, sandbox_id: ck.sandboxId, key: { ...ck.key }, created_at: toWireTime(ck.createdAt) };
  if (ck.name) out.name = ck.name;
  if (ck.tenant !== undefined) out.tenant = ck.tenant;
  return out;
}

export function checkpoint(node: SimNode, src: Claim, scope: Scope, name: string | undefined): { checkpoint: Checkpoint } {
  if (name !== undefined && name !== "" && !NAME_RE.test(name)) throw new SimError(400, "invalid checkpoint name");
  sourceChecks(src, "checkpoint");
  const ck: CheckpointRec = {
    id: node.ids.checkpointId(),
    name: name || undefined,
    sandboxId: src.id,
    key: { ...src.key },
    // The calling tenant, absent for root (sandboxd §2.1: a creation records the calling tenant).
    tenant: tenantOf(scope),
    createdAt: node.clock.now(),
  };
  node.checkpoints.set(ck.id, ck);
  node.count("checkpoints_total");
  return { checkpoint: checkpointOut(ck) };
}
