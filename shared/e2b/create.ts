// Create (docs/e2b.md "Create"): validate, take the namespace's admission, claim (a pool image by placement, a
// snapshot id on the node holding it, a built template of the namespace on its holders), then initialise envd and
// release the claim if that fails. Every node call uses the fleet root token and the raw claim id.
import type { Clock } from "../clock/index.ts";
import { advertisesImage, noCapacityForTenant, nodeByAddress } from "../fleet/index.ts";
import type { Logger } from "../log/index.ts";
import { CHECKPOINT_ID_RE, COLD_CLAIM_TIMEOUT_MS, SIZE_TIERS, isSandboxdError, metadataProblem, provablyUndelivered, type ClaimReply, type ClaimRequest, type Size } from "../sandboxd/index.ts";
import { INIT_TIMEOUT_MS, RELAY_PROXY_ENV, envdCall, initEnvd, type EnvdTarget } from "./envd.ts";
import { E2bError, badRequest, templateNotFound } from "./errors.ts";
import { lifecycleRefusal } from "./lifecycle-options.ts";
import { createOptionRefusal } from "./refused-options.ts";
import type { AliasTarget } from "./files.ts";
import { newClaimName, type IdempotentCreates, type Made, type Stamp } from "./idempotency.ts";
import { SURFACE_METADATA_PREFIX } from "./surface-metadata.ts";
import type { NodeAccess } from "./nodes.ts";
import type { OwnWrites } from "./own-writes.ts";
import { claimFailure, placeClaim, type PlacementNodes } from "./placement.ts";
import { BUILT_PREFIX, NAME_BUDGET, type Renderer } from "./render.ts";
import { looksBuilt } from "../built-templates/index.ts";
import type { NewSandbox, SandboxReply } from "./schemas.ts";
import type { Admission, E2bSettings, SandboxEvents } from "./settings.ts";
import type { Snapshots } from "./snapshots.ts";
import type { TemplateCatalog } from "./templates.ts";
import { accessTokenHash, envdAccessToken } from "./tokens.ts";
import { decidePublicTraffic, E2B_CLOUD_PUBLIC_TRAFFIC, PUBLIC_TRAFFIC_METADATA_KEY } from "../envd-token/index.ts";

/**
 * Metadata key prefixes a client may not set: vk-sandbox's stamps on a Pod's claim (shared/sandboxd/metadata.ts) and
 * the surface's own (idempotency.ts).
 */
const RESERVED_METADATA_PREFIXES = ["vk-sandbox.", SURFACE_METADATA_PREFIX];

/** The claim fields every kind of create shares. */
interface CommonClaim {
  ttl_seconds: number;
  claim_ref: string;
  metadata?: Record<string, string>;
  on_expire?: "archive";
}

type Placed = { reply: ClaimReply; template: string; size: Size; calledAddress?: string };

export interface CreateDeps {
  settings: Pick<E2bSettings, "aliases" | "envdSecret" | "rootToken" | "defaultTimeoutSeconds" | "publicTraffic">;
  nodes: PlacementNodes & Pick<NodeAccess, "nodeNameFor" | "remember" | "forget" | "fleet">;
  /** Where a built template of the namespace is held. */
  catalog: Pick<TemplateCatalog, "createHolders">;
  /** Where a snapshot id is held. */
  snapshots: Pick<Snapshots, "findCheckpoints">;
  quotas: Admission;
  render: Pick<Renderer, "sandboxReply" | "servesPublicly">;
  /** This replica lists what it created at once (own-writes.ts). */
  ownWrites: Pick<OwnWrites, "created">;
  idempotency: Pick<IdempotentCreates, "run">;
  events: SandboxEvents;
  log: Logger;
  clock: Clock;
}

export class SandboxCreator {
  constructor(private readonly d: CreateDeps) {}

  /** `idempotencyKey`: already checked (idempotencyKeyOf); a retry with it returns the first create's sandbox. */
  async create(ns: string, body: NewSandbox, idempotencyKey?: string): Promise<SandboxReply> {
    const templateID = body.templateID.trim();
    if (templateID === "") throw badRequest("templateID is required");
    // No create names a promoted ref (any spelling of the prefix): built templates resolve by bare name in the key's namespace.
    if (looksBuilt(templateID)) throw templateNotFound(templateID);
    if (body.timeout !== undefined && body.timeout < 0) throw badRequest("timeout must be >= 0");
    refuseOptions(body);
    // The node's own rules, checked here so the client gets our words for them, not the node's text.
    const metaProblem = body.metadata ? metadataProblem(body.metadata) : null;
    if (metaProblem) throw badRequest(metaProblem);
    // vk-sandbox's stamps mark a Pod's microVM (and its node, its authority): a key may not forge them.
    for (const prefix of RESERVED_METADATA_PREFIXES) {
      const reserved = Object.keys(body.metadata ?? {}).find((k) => k.startsWith(prefix));
      if (reserved !== undefined) throw badRequest(`metadata: key ${JSON.stringify(reserved)} is reserved (prefix "${prefix}")`);
    }
    body = this.stampPublicTraffic(body);
    if (idempotencyKey === undefined) return (await this.admitted(ns, body, templateID, undefined)).reply;
    return this.d.idempotency.run(ns, idempotencyKey, body, async (stamp) => {
      const problem = metadataProblem({ ...body.metadata, ...stamp.metadata });
      if (problem) throw badRequest(`${problem} (with the Idempotency-Key stamp, which takes one metadata pair)`);
      return this.admitted(ns, body, templateID, stamp);
    });
  }

  /**
   * The create's public-ports choice (`network.allowPublicTraffic` under the fleet's policy) rides on the claim's
   * metadata, where every proxy's fleet view sees it; it takes one of the node's 16 pairs.
   */
  private stampPublicTraffic(body: NewSandbox): NewSandbox {
    const traffic = decidePublicTraffic(body.network?.allowPublicTraffic, this.d.settings.publicTraffic ?? E2B_CLOUD_PUBLIC_TRAFFIC);
    if ("refused" in traffic) throw badRequest(traffic.refused);
    const metadata = { ...(body.metadata ?? {}), [PUBLIC_TRAFFIC_METADATA_KEY]: String(traffic.public) };
    // The stamp alone (one pair, a fixed printable key, "true"/"false") always passes: only a caller's map needs the re-check.
    const problem = body.metadata ? metadataProblem(metadata) : null;
    if (problem) throw badRequest(`${problem} (with the public-ports stamp, which takes one metadata pair)`);
    return { ...body, metadata };
  }

  /** Admission before any claim (a snapshot restore and a built template included); held until remembered or released. */
  private async admitted(ns: string, body: NewSandbox, templateID: string, stamp: Stamp | undefined): Promise<Made> {
    const settle = this.d.quotas.admit(ns, "create");
    try {
      return await this.claimAndInit(ns, body, templateID, stamp);
    } finally {
      settle();
    }
  }

  private resolvePool(templateID: string): { image: string; size: AliasTarget["size"] } {
    const a = this.d.settings.aliases.get(templateID);
    return a ? { image: a.image, size: a.size } : { image: templateID, size: "small" };
  }

  /** Claim where the template says: a snapshot id, a pool image, else (no pool capacity) a built template. */
  private async claim(ns: string, body: NewSandbox, templateID: string, common: CommonClaim): Promise<{ placed: Placed; builtTemplate: boolean }> {
    if (CHECKPOINT_ID_RE.test(templateID)) return { placed: await this.claimFromSnapshot(ns, templateID, common), builtTemplate: false };
    const pool = this.resolvePool(templateID);
    const net = body.allow_internet_access === true ? "egress" : "none";
    const req: ClaimRequest = {
      template: pool.image,
      net,
      size: pool.size,
      ...common,
      ...(body.allow_internet_access === false ? { egress: false } : {}),
    };
    const hit = await placeClaim(this.d.nodes, this.d.log, { template: pool.image, net, size: pool.size }, req);
    if (hit) this.d.nodes.fleet.demand?.recordClaim?.({ template: pool.image, net, size: pool.size }, hit.reply.id); // demand now, not at the next publish
    if (hit) return { placed: { reply: hit.reply, template: pool.image, size: pool.size, calledAddress: hit.calledAddress }, builtTemplate: false };
    // Only the no-capacity branch looks for a built template (pool images pay nothing for the lookup).
    const knownPool = this.d.settings.aliases.has(templateID) || advertisesImage(this.d.nodes.nodes(), pool.image);
    const built = knownPool ? undefined : await this.claimBuilt(ns, templateID, net, common, body.allow_internet_access);
    if (built) return { placed: built, builtTemplate: true };
    if (!knownPool) throw templateNotFound(templateID);
    // The explained 503 (shared/fleet/capacity.ts): counts and Retry-After, never node names or the image.
    const why = noCapacityForTenant(templateID, { template: pool.image, net, size: pool.size }, this.d.nodes.fleet);
    throw new E2bError(503, why.message, why.headers).withCode("sandbox_capacity_unavailable");
  }

  /** A create after validation and admission: claim, then initialise envd (releasing the claim if that fails). */
  private async claimAndInit(ns: string, body: NewSandbox, templateID: string, stamp: Stamp | undefined): Promise<Made> {
    const { settings, nodes, log, clock } = this.d;
    const metadata = stamp ? { ...body.metadata, ...stamp.metadata } : body.metadata;
    const common: CommonClaim = {
      ttl_seconds: body.timeout ?? settings.defaultTimeoutSeconds,
      claim_ref: `${ns}/${stamp?.claimName ?? newClaimName()}`,
      ...(metadata ? { metadata } : {}),
      ...(body.autoPause === true ? { on_expire: "archive" as const } : {}),
    };
    const { placed, builtTemplate } = await this.claim(ns, body, templateID, common);

    const { reply } = placed;
    // Call the owner at the address the fleet knows it by: `owner_addr` is the node's own advertise address, which
    // need not be how this process reaches it. A claim only lands on a node the fleet knows (unknown redirect
    // targets are skipped), so an owner_addr no fleet node matches is the node we called.
    const owner = nodeByAddress(nodes.nodes(), reply.owner_addr);
    const address = owner?.address ?? placed.calledAddress ?? reply.owner_addr;
    const nodeName = owner?.name ?? nodes.nodeNameFor(address);
    nodes.remember(ns, reply.id, address, nodeName);
    this.d.events.changed(address);
    const accessToken = envdAccessToken(settings.envdSecret, reply.id, reply.token);
    const target = { address, claimId: reply.id, rootToken: settings.rootToken };
    try {
      if (builtTemplate) {
        // The clone holds its build's access token (builds/service.ts secureGuest): hand it its own, as a fork's
        // child is (instance metadata first, then /init). It keeps the user, workdir and env its build left: merge
        // only when the caller sends envVars, read with the new token.
        await nodes.client(address).putInstanceMetadata(reply.id, { accessTokenHash: accessTokenHash(accessToken) });
        await initEnvd(target, { accessToken, timestamp: new Date(clock.now()).toISOString() });
        if (body.envVars && Object.keys(body.envVars).length) {
          const envVars = { ...(await readEnvdEnv(target, accessToken)), ...body.envVars };
          await initEnvd(target, { accessToken, envVars, timestamp: new Date(clock.now()).toISOString() }, accessToken);
        }
      } else {
        const envVars = { ...(reply.net_route === "relay" ? RELAY_PROXY_ENV : {}), ...(body.envVars ?? {}) };
        await initEnvd(target, {
          accessToken,
          ...(Object.keys(envVars).length ? { envVars } : {}),
          defaultUser: "user",
          defaultWorkdir: "/home/user",
          timestamp: new Date(clock.now()).toISOString(),
        });
      }
    } catch (err) {
      log.warn({ err, sandbox: reply.id }, "envd /init failed after claim; releasing the sandbox");
      await nodes.client(address).release(reply.id).catch((e) => log.warn({ err: e, sandbox: reply.id }, "release after a failed /init failed"));
      nodes.forget(ns, reply.id);
      throw new E2bError(500, "failed to start the sandbox").withCode("sandbox_create_failed");
    }
    this.d.events.claimed(reply.id, address, reply.token, ns, this.d.render.servesPublicly(metadata));
    const tier = SIZE_TIERS[placed.size];
    const now = clock.now();
    this.d.ownWrites.created(ns, {
      claimId: reply.id,
      nodeName,
      template: placed.template,
      claimedAt: now,
      deadline: common.ttl_seconds > 0 ? now + common.ttl_seconds * 1000 : undefined,
      paused: false,
      cpuCount: tier.cpu_count,
      memoryBytes: tier.mem_total_bytes,
      metadata,
    });
    const sandbox = this.d.render.sandboxReply({ claimId: reply.id, nodeName, template: placed.template, claimToken: reply.token, metadata });
    return { reply: sandbox, claimId: reply.id, address, nodeName };
  }

  /**
   * A create naming a built template of the namespace: claim its current key with `require_promoted` on the nodes
   * that hold it (a node answering 404 no longer does and is skipped). Undefined when the name is no built template.
   */
  private async claimBuilt(ns: string, name: string, net: "none" | "egress", common: CommonClaim, allowInternet: boolean | undefined): Promise<Placed | undefined> {
    if (`${BUILT_PREFIX}${ns}/${name}`.length > NAME_BUDGET) return undefined;
    const holders = this.d.catalog.createHolders(ns, name);
    if (holders.length === 0) return undefined;
    let capacityMiss = false;
    for (const { node, t } of holders) {
      const req: ClaimRequest = {
        template: t.template,
        net,
        size: t.size,
        ...common,
        require_promoted: true,
        ...(allowInternet === false ? { egress: false } : {}),
      };
      try {
        return { reply: await this.d.nodes.client(node.address).claim(req, { timeoutMs: COLD_CLAIM_TIMEOUT_MS }), template: t.template, size: t.size, calledAddress: node.address };
      } catch (err) {
        if (isSandboxdError(err) && err.status === 404) continue;
        if (provablyUndelivered(err)) {
          capacityMiss = true;
          continue;
        }
        throw claimFailure(err);
      }
    }
    if (capacityMiss) throw new E2bError(503, `no capacity to start template "${name}"; retry later`).withCode("sandbox_capacity_unavailable");
    return undefined;
  }

  private async claimFromSnapshot(ns: string, snapshotId: string, common: CommonClaim): Promise<Placed> {
    const { found } = await this.d.snapshots.findCheckpoints(ns);
    const hit = found.find((f) => f.ck.id === snapshotId);
    if (!hit) throw templateNotFound(snapshotId);
    try {
      const reply = await this.d.nodes.client(hit.address).claimCheckpoint(snapshotId, common);
      return { reply, template: hit.ck.key.template, size: hit.ck.key.size, calledAddress: hit.address };
    } catch (err) {
      if (provablyUndelivered(err)) throw new E2bError(503, `no capacity to start snapshot "${snapshotId}"; retry later`).withCode("sandbox_capacity_unavailable");
      throw claimFailure(err);
    }
  }
}

function refuseOptions(b: NewSandbox): void {
  if (b.secure === false) throw badRequest("secure: false is not supported: every sandbox requires its envd access token");
  if (b.autoPause === true && b.allow_internet_access === true) throw badRequest("autoPause cannot be combined with allow_internet_access: egress-lane sandboxes cannot be paused");
  // network rules, iam, volumeMounts, mcp: refused-options.ts (each named, with why).
  const option = createOptionRefusal(b);
  if (option) throw option;
  // autoPauseMemory / autoResume: lifecycle-options.ts (true is served, a filesystem-only pause and no-resume are not).
  const lifecycle = lifecycleRefusal(b);
  if (lifecycle) throw lifecycle;
}

/** envd `GET /envs` (a built template's environment), for merging a create's envVars over it. */
async function readEnvdEnv(t: EnvdTarget, accessToken: string): Promise<Record<string, string>> {
  const reply = await envdCall(t, { method: "GET", path: "/envs", headers: { "x-access-token": accessToken }, timeoutMs: INIT_TIMEOUT_MS });
  if (reply.status !== 200) throw new Error(`envd /envs answered ${reply.status}`);
  const parsed: unknown = JSON.parse(reply.body.toString("utf8"));
  if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) throw new Error("envd /envs is not an object");
  return Object.fromEntries(Object.entries(parsed as Record<string, unknown>).filter((e): e is [string, string] => typeof e[1] === "string"));
}
