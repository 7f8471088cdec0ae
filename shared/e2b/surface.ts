// The e2b surface's behaviour, one method per endpoint (docs/e2b.md), independent of HTTP: app.ts parses and
// authenticates, then calls these with the caller's namespace. Every node call uses the fleet root token and the
// raw claim id; every reply uses the public id.
import { randomBytes } from "node:crypto";
import { type Clock, realClock } from "../clock/index.ts";
import type { Logger } from "../log/index.ts";
import type { Registry } from "../metrics/index.ts";
import type { FleetSource } from "../fleet/index.ts";
import { FANOUT_CONCURRENCY, mapLimit } from "../fleet/index.ts";
import { advertisesImage, nodeByAddress } from "../fleet/index.ts";
import { COLD_CLAIM_TIMEOUT_MS } from "../sandboxd/index.ts";
import { isSandboxdError, metadataProblem, provablyUndelivered } from "../sandboxd/index.ts";

import {
  CHECKPOINT_ID_RE,
  parseWireTime,
  type ClaimReply,
  type ClaimRequest,
  type SandboxDetail,
} from "../sandboxd/index.ts";
import { E2bError, badRequest, fromNode, sandboxNotFound, templateNotFound } from "./errors.ts";
import { INIT_TIMEOUT_MS, METRICS_MAX_BYTES, METRICS_TIMEOUT_MS, RELAY_PROXY_ENV, envdCall, initEnvd } from "./envd.ts";
import type { AliasTarget } from "./files.ts";
import type { QuotaLimits } from "./keys.ts";
import { matches, page, parseFilters, parsePaging } from "./list.ts";
import { NodeAccess, entriesIn, rowBelongs, type Located } from "./nodes.ts";
import { NamespaceQuotas } from "./quotas.ts";
import { BUILT_PREFIX, NAME_BUDGET, Renderer, isPaused, wireTime } from "./render.ts";
import { Snapshots } from "./snapshots.ts";
import { claimFailure, placeClaim } from "./placement.ts";
import { TemplateCatalog } from "./templates.ts";
import { TokenForms } from "./token-forms.ts";
import {
  EnvdMetrics,
  type ListQuery,
  type ListedSandbox,
  type NewSandbox,
  type SandboxMetric,
  type SandboxReply,
} from "./schemas.ts";
import { accessTokenHash, envdAccessToken } from "./tokens.ts";
import { decidePublicTraffic, E2B_CLOUD_PUBLIC_TRAFFIC, publicTrafficStamp, PUBLIC_TRAFFIC_METADATA_KEY, trafficAccessToken, type PublicTrafficPolicy } from "./traffic.ts";

/** The metadata keys vk-sandbox stamps on a Pod's claim (shared/sandboxd/metadata.ts) all start with this. */
const RESERVED_METADATA_PREFIX = "vk-sandbox.";

export interface E2bSettings {
  namespace: string;
  domain: string;
  envdVersion: string;
  defaultTimeoutSeconds: number;
  aliases: ReadonlyMap<string, AliasTarget>;
  envdSecret: string;
  rootToken: string;
  /** Per-namespace quotas from the key file; unset fields (and unset namespaces) take `defaultQuota`. */
  quotas?: ReadonlyMap<string, Partial<QuotaLimits>>;
  /** 0 = no limit; unset = no quotas. */
  defaultQuota?: QuotaLimits;
  /** Namespaces the key file names (reported on /metrics from the start). */
  namespaces?: Iterable<string>;
  /** Public user ports (traffic.ts); unset: e2b cloud's (public unless the create says otherwise). */
  publicTraffic?: PublicTrafficPolicy;
}

export interface E2bDeps {
  fleet: FleetSource;
  log: Logger;
  /** Called after a kill released a sandbox (the in-process proxy drops its cached owner at once). */
  onReleased?: (claimId: string) => void;
  /** Called when a sandbox was claimed and initialised (the in-process proxy learns its owner at once). */
  onClaimed?: (claimId: string, address: string, claimToken: string, namespace: string, publicTraffic: boolean) => void;
  clock?: Clock;
  /** Where the quota series register (the process's metrics registry); default: a registry of their own. */
  metricsRegistry?: Registry;
}


export class E2bSurface {
  readonly nodes: NodeAccess;
  readonly catalog: TemplateCatalog;
  readonly snapshots: Snapshots;
  readonly quotas: NamespaceQuotas;
  private readonly render: Renderer;
  private readonly tokenForms: TokenForms;
  private readonly clock: Clock;

  constructor(
    readonly settings: E2bSettings,
    private readonly deps: E2bDeps,
  ) {
    this.clock = deps.clock ?? realClock;
    this.nodes = new NodeAccess(deps.fleet, settings.rootToken, deps.log, this.clock);
    const imageAliases = new Map<string, string[]>();
    for (const [alias, t] of settings.aliases) {
      const list = imageAliases.get(t.image) ?? [];
      list.push(alias);
      imageAliases.set(t.image, list.sort());
    }
    this.render = new Renderer(settings, imageAliases, this.clock);
    this.catalog = new TemplateCatalog(this.nodes, settings.aliases, imageAliases, settings.envdVersion);
    this.snapshots = new Snapshots(this.nodes);
    this.tokenForms = new TokenForms(settings.envdSecret, settings.rootToken, this.clock);
    this.quotas = new NamespaceQuotas({
      limits: settings.quotas ?? new Map(),
      defaults: settings.defaultQuota ?? { maxSandboxes: 0, createsPerSecond: 0 },
      namespaces: settings.namespaces ?? [settings.namespace],
      live: (ns) => this.nodes.liveCount(ns),
      clock: this.clock,
      ...(deps.metricsRegistry ? { registry: deps.metricsRegistry } : {}),
    });
  }

  private get log(): Logger {
    return this.deps.log;
  }


  // ------------------------------------------------------------------------------------------------------------
  // Lookup helpers

  /** Locate, then read the row live (root): a 404 anywhere is `sandbox "<id>" not found`. */
  private async locateLive(ns: string, id: string, fixed: string): Promise<{ loc: Located; row: SandboxDetail }> {
    const loc = await this.nodes.locate(ns, id);
    if (loc.row) return { loc, row: loc.row };
    let row: SandboxDetail;
    try {
      row = await this.nodes.client(loc.address).get(loc.claimId);
    } catch (err) {
      if (isSandboxdError(err) && err.status === 404) this.nodes.forget(ns, loc.claimId);
      throw fromNode(err, id, fixed);
    }
    // The live row is the last word: a Pod's microVM (stamped after the view last saw it) is not found here.
    if (!rowBelongs(row, ns)) {
      this.nodes.forget(ns, loc.claimId);
      throw sandboxNotFound(id);
    }
    return { loc, row };
  }

  private resolvePool(templateID: string): { image: string; size: AliasTarget["size"] } {
    const a = this.settings.aliases.get(templateID);
    return a ? { image: a.image, size: a.size } : { image: templateID, size: "small" };
  }

  /** The `template` list filter: an alias resolves to its image. */
  resolveTemplateFilter = (t: string): string => this.settings.aliases.get(t)?.image ?? t;

  // ------------------------------------------------------------------------------------------------------------
  // Create

  async create(ns: string, body: NewSandbox): Promise<SandboxReply> {
    const templateID = body.templateID.trim();
    if (templateID === "") throw badRequest("templateID is required");
    if (templateID.startsWith(BUILT_PREFIX)) throw templateNotFound(templateID);
    if (body.timeout !== undefined && body.timeout < 0) throw badRequest("timeout must be >= 0");
    refuseOptions(body);
    // The node's own rules, checked here so the client gets our words for them, not the node's text.
    const metaProblem = body.metadata ? metadataProblem(body.metadata) : null;
    if (metaProblem) throw badRequest(metaProblem);
    // vk-sandbox's stamps mark a Pod's microVM (and its node, its authority): a key may not forge them.
    const reserved = Object.keys(body.metadata ?? {}).find((k) => k.startsWith(RESERVED_METADATA_PREFIX));
    if (reserved !== undefined) throw badRequest(`metadata: key ${JSON.stringify(reserved)} is reserved (prefix "${RESERVED_METADATA_PREFIX}")`);
    const traffic = decidePublicTraffic(body.network?.allowPublicTraffic, this.settings.publicTraffic ?? E2B_CLOUD_PUBLIC_TRAFFIC);
    if ("refused" in traffic) throw badRequest(traffic.refused);
    // The choice rides on the claim's metadata, where every proxy's fleet view sees it; it takes one of the 16 pairs.
    const stamped = { ...(body.metadata ?? {}), [PUBLIC_TRAFFIC_METADATA_KEY]: String(traffic.public) };
    if (Object.keys(stamped).length > 16) throw badRequest("metadata: more than 15 pairs (one of the node's 16 carries the public-ports choice)");
    // Admission before any claim (a snapshot restore and a built template included); the reservation holds until
    // the claim is remembered or released.
    const settle = this.quotas.admit(ns, "create");
    try {
      return await this.claimAndInit(ns, { ...body, metadata: stamped }, templateID, traffic.public);
    } finally {
      settle();
    }
  }

  /** A create after validation and admission: claim, then initialise envd (releasing the claim if that fails). */
  private async claimAndInit(ns: string, body: NewSandbox, templateID: string, publicTraffic: boolean): Promise<SandboxReply> {
    const ttl = body.timeout ?? this.settings.defaultTimeoutSeconds;
    const claimRef = `${ns}/e2b-${randomBytes(5).toString("hex")}`;
    const common = {
      ttl_seconds: ttl,
      claim_ref: claimRef,
      ...(body.metadata ? { metadata: body.metadata } : {}),
      ...(body.autoPause === true ? { on_expire: "archive" as const } : {}),
    };

    let placed: { reply: ClaimReply; template: string; calledAddress?: string } | undefined;
    let builtTemplate = false;
    if (CHECKPOINT_ID_RE.test(templateID)) {
      placed = await this.claimFromSnapshot(ns, templateID, common);
    } else {
      const pool = this.resolvePool(templateID);
      const net = body.allow_internet_access === true ? "egress" : "none";
      const req: ClaimRequest = {
        template: pool.image,
        net,
        size: pool.size,
        ...common,
        ...(body.allow_internet_access === false ? { egress: false } : {}),
      };
      const hit = await placeClaim(this.nodes, this.log, { template: pool.image, net, size: pool.size }, req);
      if (hit) placed = { reply: hit.reply, template: pool.image, calledAddress: hit.calledAddress };
      else {
        // Only the no-capacity branch looks for a built template (pool images pay nothing for the lookup).
        const knownPool = this.settings.aliases.has(templateID) || advertisesImage(this.nodes.nodes(), pool.image);
        const built = knownPool ? undefined : await this.claimBuilt(ns, templateID, net, common, body.allow_internet_access);
        if (built) {
          placed = built;
          builtTemplate = true;
        } else if (!knownPool) throw templateNotFound(templateID);
        else throw new E2bError(503, `no warm sandbox available for template "${templateID}"; retry as warm capacity refills`);
      }
    }

    const { reply } = placed;
    // Call the owner at the address the fleet knows it by: `owner_addr` is the node's own advertise address, which
    // need not be how this process reaches it. A claim only lands on a node the fleet knows (unknown redirect
    // targets are skipped), so an owner_addr no fleet node matches is the node we called.
    const owner = nodeByAddress(this.nodes.nodes(), reply.owner_addr);
    const address = owner?.address ?? placed.calledAddress ?? reply.owner_addr;
    const nodeName = owner?.name ?? this.nodes.nodeNameFor(address);
    this.nodes.remember(ns, reply.id, address, nodeName);
    this.deps.fleet.changed?.(address);
    const accessToken = envdAccessToken(this.settings.envdSecret, reply.id, reply.token);
    const relayEnv = reply.net_route === "relay" ? RELAY_PROXY_ENV : {};
    const target = { address, claimId: reply.id, rootToken: this.settings.rootToken };
    try {
      if (builtTemplate) {
        // A built template keeps the user, workdir and env its build left: merge only when the caller sends envVars.
        const envVars = body.envVars && Object.keys(body.envVars).length ? { ...(await readEnvdEnv(target)), ...body.envVars } : undefined;
        await initEnvd(target, { accessToken, ...(envVars ? { envVars } : {}), timestamp: new Date(this.clock.now()).toISOString() });
      } else {
        const envVars = { ...relayEnv, ...(body.envVars ?? {}) };
        await initEnvd(target, {
          accessToken,
          ...(Object.keys(envVars).length ? { envVars } : {}),
          defaultUser: "user",
          defaultWorkdir: "/home/user",
          timestamp: new Date(this.clock.now()).toISOString(),
        });
      }
    } catch (err) {
      this.log.warn({ err, sandbox: reply.id }, "envd /init failed after claim; releasing the sandbox");
      await this.nodes.client(address).release(reply.id).catch((e) => this.log.warn({ err: e, sandbox: reply.id }, "release after a failed /init failed"));
      this.nodes.forget(ns, reply.id);
      throw new E2bError(500, "failed to start the sandbox");
    }
    this.deps.onClaimed?.(reply.id, address, reply.token, ns, publicTraffic);
    const rendered = this.render.sandboxReply({ claimId: reply.id, nodeName, template: placed.template, claimToken: reply.token });
    return publicTraffic ? rendered : { ...rendered, trafficAccessToken: trafficAccessToken(this.settings.envdSecret, reply.token) };
  }

  /**
   * A create naming a built template of the namespace: claim its current key with `require_promoted` on the nodes
   * that hold it (a node answering 404 no longer does and is skipped). Undefined when the name is no built template.
   */
  private async claimBuilt(
    ns: string,
    name: string,
    net: "none" | "egress",
    common: { ttl_seconds: number; claim_ref: string; metadata?: Record<string, string>; on_expire?: "archive" },
    allowInternet: boolean | undefined,
  ): Promise<{ reply: ClaimReply; template: string; calledAddress: string } | undefined> {
    if (`${BUILT_PREFIX}${ns}/${name}`.length > NAME_BUDGET) return undefined;
    const holders = this.catalog.builtHolders(ns, name);
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
        return { reply: await this.nodes.client(node.address).claim(req, { timeoutMs: COLD_CLAIM_TIMEOUT_MS }), template: t.template, calledAddress: node.address };
      } catch (err) {
        if (isSandboxdError(err) && err.status === 404) continue;
        if (provablyUndelivered(err)) {
          capacityMiss = true;
          continue;
        }
        throw claimFailure(err);
      }
    }
    if (capacityMiss) throw new E2bError(503, `no capacity to start template "${name}"; retry later`);
    return undefined;
  }

  private async claimFromSnapshot(
    ns: string,
    snapshotId: string,
    common: { ttl_seconds: number; claim_ref: string; metadata?: Record<string, string>; on_expire?: "archive" },
  ): Promise<{ reply: ClaimReply; template: string; calledAddress: string }> {
    const { found } = await this.snapshots.findCheckpoints(ns);
    const hit = found.find((f) => f.ck.id === snapshotId);
    if (!hit) throw templateNotFound(snapshotId);
    try {
      const reply = await this.nodes.client(hit.address).claimCheckpoint(snapshotId, common);
      return { reply, template: hit.ck.key.template, calledAddress: hit.address };
    } catch (err) {
      if (provablyUndelivered(err)) throw new E2bError(503, `no capacity to start snapshot "${snapshotId}"; retry later`);
      throw claimFailure(err);
    }
  }

  // ------------------------------------------------------------------------------------------------------------
  // Read, list, kill, lease

  async get(ns: string, id: string): Promise<ListedSandbox> {
    const { loc, row } = await this.locateLive(ns, id, "failed to read the sandbox");
    return this.render.detailFromRow(loc, row);
  }

  list(ns: string, q: ListQuery, paged: boolean): { items: ListedSandbox[]; nextToken: string | undefined } {
    const filters = parseFilters(q, this.resolveTemplateFilter);
    const paging = paged ? parsePaging(q) : undefined;
    const items = entriesIn(this.nodes.nodes(), ns)
      .map(({ node, entry }) =>
        this.render.listed({
          claimId: entry.id,
          nodeName: node.name,
          template: entry.template ?? "",
          claimedAt: entry.claimedAt,
          deadline: entry.deadline,
          paused: entry.phase === "Hibernated",
          cpuCount: entry.cpuCount,
          memoryBytes: entry.memoryBytes,
          metadata: entry.metadata,
        }),
      )
      .filter((it) => matches(it, filters));
    if (!paging) return { items, nextToken: undefined };
    return page(items, paging);
  }

  async kill(ns: string, id: string): Promise<void> {
    const loc = await this.nodes.locate(ns, id);
    try {
      await this.nodes.client(loc.address).release(loc.claimId);
    } catch (err) {
      throw new E2bError(500, "failed to release the sandbox");
    }
    this.nodes.forget(ns, loc.claimId);
    this.nodes.markReleased(loc.claimId);
    this.deps.onReleased?.(loc.claimId);
    this.deps.fleet.changed?.(loc.address);
  }

  async setTimeout(ns: string, id: string, seconds: number): Promise<void> {
    if (seconds < 0) throw badRequest("timeout must be >= 0");
    const loc = await this.nodes.locate(ns, id);
    try {
      await this.nodes.client(loc.address).renew(loc.claimId, seconds);
    } catch (err) {
      throw fromNode(err, id, "failed to extend the sandbox lease");
    }
  }

  async refresh(ns: string, id: string, duration: number | undefined): Promise<void> {
    await this.setTimeout(ns, id, duration !== undefined && duration > 0 ? duration : this.settings.defaultTimeoutSeconds);
  }

  // ------------------------------------------------------------------------------------------------------------
  // Pause, connect, resume

  async pause(ns: string, id: string, memory: boolean | undefined): Promise<void> {
    if (memory === false) throw badRequest("pause without memory (filesystem-only) is not supported; pause keeps memory");
    const { loc, row } = await this.locateLive(ns, id, "failed to pause the sandbox");
    if (isPaused(row)) throw new E2bError(409, `sandbox "${id}" is already paused`);
    if (row.key.net === "egress") {
      throw badRequest(`sandbox "${id}" has internet access (egress lane), which cannot be paused: its network attachment does not survive hibernation`);
    }
    try {
      await this.nodes.client(loc.address).hibernate(loc.claimId);
    } catch (err) {
      throw fromNode(err, id, "failed to pause the sandbox");
    }
    this.deps.fleet.changed?.(loc.address);
  }

  /** connect (running: 200, paused: wake + 201) and the legacy resume (running: 409). */
  async connect(
    ns: string,
    id: string,
    body: { timeout?: number; memory?: boolean; autoPause?: boolean },
    kind: "connect" | "resume",
  ): Promise<{ status: 200 | 201; sandbox: SandboxReply }> {
    const fixed = kind === "connect" ? "failed to connect the sandbox" : "failed to resume the sandbox";
    if (body.memory === false) throw badRequest("resuming with a fresh boot (memory: false) is not supported; a paused sandbox resumes with its memory");
    if (body.timeout !== undefined && body.timeout < 0) throw badRequest("timeout must be >= 0");
    let { loc, row } = await this.locateLive(ns, id, fixed);
    const client = this.nodes.client(loc.address);
    let status: 200 | 201 = 200;
    try {
      if (isPaused(row)) {
        // Waking restores a VM like a create does: it takes a start of the namespace's rate (it adds no sandbox).
        this.quotas.admit(ns, "resume");
        await client.wake(loc.claimId);
        row = await client.get(loc.claimId);
        status = 201;
        this.deps.fleet.changed?.(loc.address);
      } else if (kind === "resume") {
        throw new E2bError(409, `sandbox "${id}" is already running`);
      }
      const ttl = body.timeout ?? this.settings.defaultTimeoutSeconds;
      const deadline = row.deadline ? parseWireTime(row.deadline) : null;
      const left = deadline ? Math.ceil((deadline - this.clock.now()) / 1000) : 0;
      if (ttl > left || body.autoPause !== undefined) {
        const onExpire = body.autoPause === undefined ? undefined : body.autoPause ? "archive" : "destroy";
        await client.renew(loc.claimId, Math.max(ttl, left), onExpire ? { onExpire } : {});
      }
    } catch (err) {
      throw fromNode(err, id, fixed);
    }
    if (!row.token) throw new E2bError(500, fixed);
    const accessToken = await this.tokenForms.accessTokenFor(loc.address, loc.claimId, row.token, claimedAtOf(row));
    const sandbox = this.render.sandboxReply({ claimId: loc.claimId, nodeName: loc.nodeName, template: row.key.template, claimToken: row.token, accessToken });
    // A connect hands back the traffic token too (the SDK keeps the connect reply's, not the create's).
    const policy = this.settings.publicTraffic ?? E2B_CLOUD_PUBLIC_TRAFFIC;
    const open = !policy.forbid && (publicTrafficStamp(row.metadata) ?? policy.defaultPublic);
    return { status, sandbox: open ? sandbox : { ...sandbox, trafficAccessToken: trafficAccessToken(this.settings.envdSecret, row.token) } };
  }

  // ------------------------------------------------------------------------------------------------------------
  // Fork

  async fork(ns: string, id: string, body: { timeout?: number; count?: number }): Promise<SandboxReply[]> {
    const count = body.count ?? 1;
    if (count < 1) throw badRequest("count must be >= 1");
    if (body.timeout !== undefined && body.timeout < 0) throw badRequest("timeout must be >= 0");
    const { loc, row } = await this.locateLive(ns, id, "failed to fork the sandbox");
    if (isPaused(row)) throw new E2bError(409, `sandbox "${id}" is paused; resume it first`);
    const settle = this.quotas.admit(ns, "fork", count);
    try {
      return await this.forkAdmitted(ns, id, loc, row, count, body.timeout);
    } finally {
      settle();
    }
  }

  private async forkAdmitted(ns: string, id: string, loc: Located, row: SandboxDetail, count: number, timeout: number | undefined): Promise<SandboxReply[]> {
    const client = this.nodes.client(loc.address);
    let children: ClaimReply[];
    try {
      children = (await client.fork(loc.claimId, { count, ttl_seconds: timeout ?? this.settings.defaultTimeoutSeconds, claim_ref_prefix: `${ns}/` }));
    } catch (err) {
      throw fromNode(err, id, "failed to fork the sandbox");
    }
    const results = await mapLimit(children, FANOUT_CONCURRENCY, async (child) => {
      // Children live on the parent's node; reach it the way the fleet does (owner_addr is its own advertise name).
      const address = nodeByAddress(this.nodes.nodes(), child.owner_addr)?.address ?? loc.address;
      const accessToken = envdAccessToken(this.settings.envdSecret, child.id, child.token);
      await this.nodes.client(address).putInstanceMetadata(child.id, { accessTokenHash: accessTokenHash(accessToken) });
      await initEnvd({ address, claimId: child.id, rootToken: this.settings.rootToken }, { accessToken, timestamp: new Date(this.clock.now()).toISOString() });
      return address;
    });
    if (results.some((r) => r instanceof Error)) {
      this.log.warn({ sandbox: loc.claimId, err: results.find((r) => r instanceof Error) }, "fork child initialisation failed; releasing every child");
      await Promise.all(children.map((c) => this.nodes.client(nodeByAddress(this.nodes.nodes(), c.owner_addr)?.address ?? loc.address).release(c.id).catch(() => undefined)));
      throw new E2bError(500, "failed to fork the sandbox");
    }
    this.deps.fleet.changed?.(loc.address);
    return children.map((child, k) => {
      const address = results[k] as string;
      const nodeName = this.nodes.nodeNameFor(address);
      this.nodes.remember(ns, child.id, address, nodeName);
      // A fork child keeps its parent's public-ports choice when the parent's row carries it.
      const policy = this.settings.publicTraffic ?? E2B_CLOUD_PUBLIC_TRAFFIC;
      this.deps.onClaimed?.(child.id, address, child.token, ns, !policy.forbid && (publicTrafficStamp(row.metadata) ?? policy.defaultPublic));
      return this.render.sandboxReply({ claimId: child.id, nodeName, template: row.key.template, claimToken: child.token });
    });
  
  }

  // ------------------------------------------------------------------------------------------------------------
  // Metrics and logs

  /** One metric of a running sandbox through the passive relay; [] when paused (never woken). */
  async metrics(ns: string, id: string): Promise<SandboxMetric[]> {
    const { loc, row } = await this.locateLive(ns, id, "failed to read sandbox metrics");
    if (isPaused(row)) return [];
    if (!row.token) throw new E2bError(500, "failed to read sandbox metrics");
    let reply;
    try {
      reply = await envdCall(
        { address: loc.address, claimId: loc.claimId, rootToken: this.settings.rootToken },
        { method: "GET", path: "/metrics", headers: { "x-access-token": await this.tokenForms.accessTokenFor(loc.address, loc.claimId, row.token, claimedAtOf(row)) }, timeoutMs: METRICS_TIMEOUT_MS, maxBytes: METRICS_MAX_BYTES },
      );
    } catch (err) {
      // Paused between the read and the relay: the node refuses the passive relay with 409.
      if ((err as { status?: number }).status === 409) return [];
      throw new E2bError(500, "failed to read sandbox metrics");
    }
    if (reply.status !== 200) throw new E2bError(500, "failed to read sandbox metrics");
    let parsed;
    try {
      parsed = EnvdMetrics.parse(JSON.parse(reply.body.toString("utf8")));
    } catch {
      throw new E2bError(500, "failed to read sandbox metrics");
    }
    const tsMs = parsed.ts ? parsed.ts * 1000 : this.clock.now();
    return [
      {
        timestamp: wireTime(tsMs),
        timestampUnix: Math.floor(tsMs / 1000),
        cpuCount: Math.round(parsed.cpu_count ?? 0),
        cpuUsedPct: parsed.cpu_used_pct ?? 0,
        memUsed: Math.round(parsed.mem_used ?? 0),
        memTotal: Math.round(parsed.mem_total ?? 0),
        memCache: Math.round(parsed.mem_cache ?? 0),
        diskUsed: Math.round(parsed.disk_used ?? 0),
        diskTotal: Math.round(parsed.disk_total ?? 0),
      },
    ];
  }

  async metricsMany(ns: string, idsText: string | undefined): Promise<Record<string, SandboxMetric>> {
    const ids = (idsText ?? "").split(",").map((s) => s.trim());
    if (ids.length === 0 || ids.some((s) => s === "")) throw badRequest("sandbox_ids: give 1 to 100 comma-separated, non-empty ids");
    if (ids.length > 100) throw badRequest("sandbox_ids: at most 100 ids");
    if (new Set(ids).size !== ids.length) throw badRequest("sandbox_ids: an id is repeated");
    const out: Record<string, SandboxMetric> = {};
    const results = await mapLimit(ids, FANOUT_CONCURRENCY, (id) => this.metrics(ns, id));
    ids.forEach((id, i) => {
      const r = results[i];
      if (Array.isArray(r) && r[0]) out[id] = r[0];
    });
    return out;
  }

  /** Logs: no log storage exists; a visible sandbox answers empty arrays, an unknown one 404. */
  async assertVisible(ns: string, id: string): Promise<void> {
    await this.locateLive(ns, id, "failed to read the sandbox");
  }

}

function claimedAtOf(row: SandboxDetail): number | undefined {
  const t = row.claimed_at ? parseWireTime(row.claimed_at) : null;
  return t ?? undefined;
}

function refuseOptions(b: NewSandbox): void {
  const nonEmpty = (v: unknown) => v !== undefined && v !== null && !(Array.isArray(v) && v.length === 0) && !(typeof v === "object" && !Array.isArray(v) && Object.keys(v as object).length === 0);
  if (b.secure === false) throw badRequest("secure: false is not supported: every sandbox requires its envd access token");
  if (b.autoPause === true && b.allow_internet_access === true) throw badRequest("autoPause cannot be combined with allow_internet_access: egress-lane sandboxes cannot be paused");
  const { allowPublicTraffic: _served, ...rules } = b.network ?? {};
  if (nonEmpty(rules)) throw badRequest(`network rules other than allowPublicTraffic are not supported (got ${Object.keys(rules).map((k) => JSON.stringify(k)).join(", ")})`);
  if (nonEmpty(b.volumeMounts)) throw badRequest("volumeMounts are not supported");
  if (b.autoPauseMemory !== undefined) throw badRequest("autoPauseMemory is not supported: an auto-paused sandbox always keeps its memory");
  if (b.autoResume?.enabled === false) throw badRequest("autoResume: {enabled: false} is not supported: data-plane traffic with a valid token always wakes a paused sandbox here");
  if (nonEmpty(b.mcp)) throw badRequest("mcp is not supported");
  if (nonEmpty(b.iam)) throw badRequest("iam is not supported");
}

/** envd `GET /envs` (a built template's environment), for merging a create's envVars over it. */
async function readEnvdEnv(t: { address: string; claimId: string; rootToken: string }): Promise<Record<string, string>> {
  const reply = await envdCall(t, { method: "GET", path: "/envs", timeoutMs: INIT_TIMEOUT_MS });
  if (reply.status !== 200) throw new Error(`envd /envs answered ${reply.status}`);
  const parsed: unknown = JSON.parse(reply.body.toString("utf8"));
  if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) throw new Error("envd /envs is not an object");
  return Object.fromEntries(Object.entries(parsed as Record<string, unknown>).filter((e): e is [string, string] => typeof e[1] === "string"));
}
