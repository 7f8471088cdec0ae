// Create = claim one warm microVM at a chosen node (docs/api.md "Create"). Nothing is stored: every call claims.
// Placement: two weighted draws over the fresh nodes warm for the key, keep the warmer. A node that provably handed
// out nothing (429, 200 without id, refused connection, any 5xx) is dropped and we re-pick; anything that may have
// handed out a VM fails at once and is never retried elsewhere, so one Create never claims two microVMs.
import { randomUUID } from "node:crypto";
import type { Logger } from "pino";
import { type InventoryRecord, explainNoCapacity } from "#shared/fleet/index.ts";
import {
  type ClaimReply,
  type PoolKey,
  SandboxdAmbiguousClaim,
  SandboxdRedirect,
  SandboxdServerError,
  provablyUndelivered,
} from "#shared/sandboxd/index.ts";
import { ApiError, badRequest, forbidden, internal } from "../api/index.ts";
import { builtTemplateRefusal } from "#shared/built-templates/index.ts";
import type { NodeClients } from "./nodes.ts";
import {
  ANN_ADDRESS,
  ANN_CLAIM_ID,
  ANN_DEADLINE,
  ANN_NET,
  ANN_TOKEN,
  ANN_TTL_SECONDS,
  type Sandbox,
  hostOf,
  rfc3339Seconds,
} from "./object.ts";
import { PoolKeyError, poolKeyOf, type PodTemplateLike } from "./pool-key.ts";
import { parseWireTime } from "#shared/sandboxd/index.ts";
import { type Clock, realClock } from "#shared/clock/index.ts";

export interface CreateDeps {
  fresh: () => readonly InventoryRecord[];
  clients: NodeClients;
  clock?: Clock;
  random?: () => number;
  log?: Logger;
  /** Called with the owning node of every claim (the owner index, metrics, the demand meter). */
  onClaimed?: (namespace: string, name: string, id: string, node: string, key: PoolKey) => void;
  /** Nodes known but left out as stale (the capacity answer counts them). */
  staleCount?: () => number;
  /** Called when no node could serve the key (the demand meter counts it: a dry pool's demand is not what it serves). */
  onNoCapacity?: (key: PoolKey) => void;
  /** The key's measured refill time in ms, if any (the capacity answer's Retry-After). */
  refillMs?: (key: PoolKey) => number | undefined;
  /** Called when a claim was attempted and failed (metrics). */
  onFailed?: () => void;
}

const NAME_MAX = 63;
const RANDOM_SUFFIX = 5;
const ALNUM = "bcdfghjklmnpqrstvwxz2456789"; // apimachinery's generateName alphabet (no vowels, no 0/1/3)

/** `generateName` + 5 random characters, the base cut so the whole fits 63. */
export function generatedName(base: string, random: () => number = Math.random): string {
  let suffix = "";
  for (let i = 0; i < RANDOM_SUFFIX; i++) suffix += ALNUM[Math.floor(random() * ALNUM.length)];
  return base.slice(0, NAME_MAX - RANDOM_SUFFIX) + suffix;
}

/** TTL in seconds (0 = node default): spec.shutdownTime rounded up, else the ttl-seconds annotation. */
export function ttlSecondsOf(obj: Sandbox, nowMs: number, name: string): number {
  const shutdown = obj.spec.shutdownTime;
  if (shutdown !== undefined && shutdown !== null && shutdown !== "") {
    const ms = typeof shutdown === "string" ? Date.parse(shutdown) : NaN;
    if (Number.isNaN(ms)) throw badRequest(`spec.shutdownTime ${JSON.stringify(shutdown)} is not an RFC3339 time`, name);
    if (ms <= nowMs) throw badRequest(`spec.shutdownTime ${rfc3339Seconds(ms)} is not in the future`, name);
    return Math.ceil((ms - nowMs) / 1000);
  }
  const ann = obj.metadata.annotations?.[ANN_TTL_SECONDS];
  if (ann === undefined) return 0;
  if (!/^\d+$/.test(ann) || !Number.isSafeInteger(Number(ann))) {
    throw badRequest(`invalid ${ANN_TTL_SECONDS}="${ann}": want a non-negative integer of seconds`, name);
  }
  return Number(ann);
}

/**
 * A built template (`e2b/<ns>/<name>`) only of the Sandbox's own namespace, never a step cache entry
 * (shared/built-templates): 403 naming the template and its namespace, 422 for a name that is no template.
 */
export function refuseOthersTemplate(template: string, namespace: string, name: string): void {
  const refused = builtTemplateRefusal(template, namespace);
  if (!refused) return;
  const message = `spec.podTemplate.spec.containers[0].image: ${refused.message}`;
  throw refused.kind === "other-namespace" ? forbidden(message, name) : new ApiError(422, message, "Invalid", name);
}

export function createKeyOf(obj: Sandbox, name: string): PoolKey {
  const pt = obj.spec.podTemplate as PodTemplateLike | undefined;
  try {
    return poolKeyOf(pt, [obj.metadata.annotations?.[ANN_NET], pt?.metadata?.annotations?.[ANN_NET]], "spec.podTemplate");
  } catch (e) {
    if (e instanceof PoolKeyError) throw badRequest(e.message, name);
    throw e;
  }
}

interface Candidate {
  rec: InventoryRecord;
  warm: number;
}

function candidatesFor(nodes: readonly InventoryRecord[], key: PoolKey): Candidate[] {
  const out: Candidate[] = [];
  for (const rec of nodes) {
    if (!rec.address) continue;
    let warm = 0;
    for (const p of rec.inventory.pools ?? []) {
      if (p.warm > 0 && p.template === key.template && (p.net || "none") === key.net && (p.size || "small") === key.size) warm += p.warm;
    }
    if (warm > 0) out.push({ rec, warm });
  }
  return out;
}

/** Two draws weighted by warm count, with replacement; the warmer wins, the first on ties. */
function pick(cands: readonly Candidate[], random: () => number): Candidate {
  const total = cands.reduce((s, c) => s + c.warm, 0);
  const draw = () => {
    let r = random() * total;
    for (const c of cands) {
      r -= c.warm;
      if (r < 0) return c;
    }
    return cands[cands.length - 1]!;
  };
  const a = draw();
  const b = draw();
  return b.warm > a.warm ? b : a;
}

/** The outcome of a claim: the reply and the node that owns the sandbox (a redirect target, when one served). */
interface Claimed {
  reply: ClaimReply;
  node: InventoryRecord;
}

export async function createSandbox(deps: CreateDeps, namespace: string, obj: Sandbox): Promise<Sandbox> {
  const random = deps.random ?? Math.random;
  const clock = deps.clock ?? realClock;
  const name = obj.metadata.name || (obj.metadata.generateName ? generatedName(obj.metadata.generateName, random) : "");
  if (!name) throw badRequest("Sandbox has neither metadata.name nor metadata.generateName");
  const key = createKeyOf(obj, name);
  refuseOthersTemplate(key.template, namespace, name);
  const ttl = ttlSecondsOf(obj, clock.now(), name);
  const claimRef = `${namespace}/${name}`;
  const log = deps.log?.child({ sandbox: claimRef });

  let claimed: Claimed;
  try {
    claimed = await claimSomewhere(deps, key, ttl, claimRef, random, log);
  } catch (e) {
    deps.onFailed?.();
    throw e;
  }
  deps.onClaimed?.(namespace, name, claimed.reply.id, claimed.node.name, key);

  const annotations: Record<string, string> = { ...(obj.metadata.annotations ?? {}), [ANN_CLAIM_ID]: claimed.reply.id };
  if (claimed.reply.owner_addr) annotations[ANN_ADDRESS] = claimed.reply.owner_addr;
  if (claimed.reply.token) annotations[ANN_TOKEN] = claimed.reply.token;
  const deadline = safeWireMs(claimed.reply.deadline);
  if (deadline) annotations[ANN_DEADLINE] = rfc3339Seconds(deadline);
  const { generateName: _dropped, ...meta } = obj.metadata;
  return {
    ...obj,
    metadata: {
      ...meta,
      name,
      namespace,
      uid: randomUUID(),
      creationTimestamp: rfc3339Seconds(clock.now()),
      resourceVersion: "",
      annotations,
    },
    status: {
      nodeName: claimed.node.name,
      ...(claimed.reply.owner_addr ? { podIPs: [hostOf(claimed.reply.owner_addr)] } : {}),
      conditions: [
        {
          type: "Ready",
          status: "True",
          reason: "DependenciesReady",
          message: `warm sandbox "${claimed.reply.id}" delivered by node "${claimed.node.name}"`,
        },
      ],
    },
  };
}

function safeWireMs(s: string): number | undefined {
  try {
    return parseWireTime(s) ?? undefined;
  } catch {
    return undefined;
  }
}

async function claimSomewhere(deps: CreateDeps, key: PoolKey, ttl: number, claimRef: string, random: () => number, log?: Logger): Promise<Claimed> {
  const nodes = deps.fresh();
  let cands = candidatesFor(nodes, key);
  const body = { template: key.template, net: key.net, size: key.size, ...(ttl > 0 ? { ttl_seconds: ttl } : {}), claim_ref: claimRef };
  const fail = (e: unknown, node: string) => {
    const [ns, name] = [claimRef.slice(0, claimRef.indexOf("/")), claimRef.slice(claimRef.indexOf("/") + 1)];
    return internal(`claim sandbox ${ns}/${name}: node "${node}": ${(e as Error).message}`, name, e);
  };
  while (cands.length > 0) {
    const c = pick(cands, random);
    try {
      // One hop of redirects is replayed here, not in the client: only a target that a fresh inventory advertises
      // may be claimed at (its node must own the result), and the reconcile-by-listing path is off because a
      // repeated Create of one name legitimately holds several VMs under the same claim_ref.
      const reply = await deps.clients.for(c.rec.address).claim(body, { followRedirects: false, reconcile: false });
      return { reply, node: c.rec };
    } catch (e) {
      if (e instanceof SandboxdRedirect) {
        const served = await replayRedirect(deps, e.targets, body, nodes, log);
        if (served.kind === "claimed") return served.claimed;
        if (served.kind === "failed") throw fail(served.error, served.node);
        const targets = new Set(e.targets.map(normalizeAddress));
        cands = cands.filter((x) => x !== c && !targets.has(normalizeAddress(x.rec.address)));
        continue;
      }
      if (provablyUndelivered(e) || isPlain5xx(e)) {
        log?.info({ node: c.rec.name, err: (e as Error).message }, "node did not serve the claim; trying another");
        cands = cands.filter((x) => x !== c);
        continue;
      }
      throw fail(e, c.rec.name);
    }
  }
  // Nothing served: say why, and when to come back (docs/api.md "Create", shared/fleet/capacity.ts).
  deps.onNoCapacity?.(key);
  const answer = explainNoCapacity({ key, fresh: nodes.map((n) => n.fleet), stale: deps.staleCount?.() ?? 0, refillMs: deps.refillMs?.(key) });
  throw new ApiError(503, answer.message, "ServiceUnavailable", claimRef.slice(claimRef.indexOf("/") + 1), answer.retryAfterSeconds === undefined ? {} : { retryAfterSeconds: answer.retryAfterSeconds });
}

/** A 5xx answer (other than "provisioning failed", which is already undelivered) that the claim path declined to reconcile. */
function isPlain5xx(e: unknown): boolean {
  return e instanceof SandboxdAmbiguousClaim && e.cause instanceof SandboxdServerError;
}

function normalizeAddress(a: string): string {
  return a.trim().replace(/\/+$/, "").replace(/^https?:\/\//, "");
}

type RedirectOutcome = { kind: "claimed"; claimed: Claimed } | { kind: "failed"; error: unknown; node: string } | { kind: "none" };

async function replayRedirect(
  deps: CreateDeps,
  targets: readonly string[],
  body: Record<string, unknown> & { template: string },
  nodes: readonly InventoryRecord[],
  log?: Logger,
): Promise<RedirectOutcome> {
  for (const target of targets) {
    const rec = nodes.find((n) => n.address && normalizeAddress(n.address) === normalizeAddress(target));
    if (!rec) {
      log?.info({ target }, "redirect target is not a fresh inventory address; skipped");
      continue;
    }
    try {
      const reply = await deps.clients.for(rec.address).claim({ ...body, no_redirect: true }, { followRedirects: false, reconcile: false });
      return { kind: "claimed", claimed: { reply, node: rec } };
    } catch (e) {
      if (provablyUndelivered(e) || isPlain5xx(e)) continue;
      return { kind: "failed", error: e, node: rec.name };
    }
  }
  return { kind: "none" };
}
