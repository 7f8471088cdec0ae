// The e2b surface's behaviour, one method per endpoint (docs/e2b.md), independent of HTTP: app.ts parses and
// authenticates, then calls these with the caller's namespace. Every node call uses the fleet root token and the
// raw claim id; every reply uses the public id.
import { createHash, randomBytes } from "node:crypto";
import { type Clock, realClock } from "../clock/index.ts";
import type { Logger } from "../log/index.ts";
import type { FleetSource } from "../fleet/index.ts";
import { FANOUT_CONCURRENCY, mapLimit } from "../fleet/index.ts";
import { advertisesImage, claimCandidates, entriesOf, nodeByAddress } from "../fleet/index.ts";
import { COLD_CLAIM_TIMEOUT_MS, SandboxdClient } from "../sandboxd/index.ts";
import { isSandboxdError, provablyUndelivered } from "../sandboxd/index.ts";
import {
  CHECKPOINT_ID_RE,
  SIZE_TIERS,
  parseWireTime,
  type Checkpoint,
  type ClaimReply,
  type ClaimRequest,
  type PoolKey,
  type SandboxDetail,
} from "../sandboxd/index.ts";
import { E2bError, badRequest, fromNode, sandboxNotFound, templateNotFound } from "./errors.ts";
import { INIT_TIMEOUT_MS, METRICS_MAX_BYTES, METRICS_TIMEOUT_MS, RELAY_PROXY_ENV, envdCall, initEnvd } from "./envd.ts";
import type { AliasTarget } from "./files.ts";
import { publicSandboxId, sameSandboxId } from "./ids.ts";
import { matches, page, parseFilters, parsePaging } from "./list.ts";
import { NodeAccess, type Located } from "./nodes.ts";
import {
  EnvdMetrics,
  type ListQuery,
  type ListedSandbox,
  type NewSandbox,
  type SandboxMetric,
  type SandboxReply,
  type SnapshotInfo,
} from "./schemas.ts";
import { accessTokenHash, deriveAccessToken, opaqueClientId } from "./tokens.ts";

/** Checkpoint names and stamped refs: at most this long on the node. */
const NAME_BUDGET = 63;
/** Built templates are promoted as `e2b/<namespace>/<name>`; the prefix is never addressable by clients. */
const BUILT_PREFIX = "e2b/";

export interface E2bSettings {
  namespace: string;
  domain: string;
  envdVersion: string;
  defaultTimeoutSeconds: number;
  aliases: ReadonlyMap<string, AliasTarget>;
  envdSecret: string;
  rootToken: string;
}

export interface E2bDeps {
  fleet: FleetSource;
  log: Logger;
  /** Called after a kill released a sandbox (the in-process proxy drops its cached owner at once). */
  onReleased?: (claimId: string) => void;
  /** Called when a sandbox was claimed and initialised (the in-process proxy learns its owner at once). */
  onClaimed?: (claimId: string, address: string, claimToken: string) => void;
  clock?: Clock;
}

/** RFC 3339 UTC, second precision (the surface's wire time). */
export function wireTime(ms: number): string {
  return new Date(Math.floor(ms / 1000) * 1000).toISOString().replace(/\.000Z$/, "Z");
}

const isPaused = (row: { hibernated: boolean; archived?: boolean }) => row.hibernated || row.archived === true;

export class E2bSurface {
  readonly nodes: NodeAccess;
  private readonly clock: Clock;
  /** image -> its aliases, sorted; a reply's `alias` is the first. */
  private readonly imageAliases = new Map<string, string[]>();

  constructor(
    readonly settings: E2bSettings,
    private readonly deps: E2bDeps,
  ) {
    this.clock = deps.clock ?? realClock;
    this.nodes = new NodeAccess(deps.fleet, settings.rootToken, deps.log, this.clock);
    for (const [alias, t] of settings.aliases) {
      const list = this.imageAliases.get(t.image) ?? [];
      list.push(alias);
      this.imageAliases.set(t.image, list.sort());
    }
  }

  private get log(): Logger {
    return this.deps.log;
  }

  // ------------------------------------------------------------------------------------------------------------
  // Rendering

  /** What a client sees as templateID: built templates by their bare name, pool images as they are. */
  private displayTemplate(template: string): string {
    if (!template.startsWith(BUILT_PREFIX)) return template;
    const rest = template.slice(BUILT_PREFIX.length);
    const i = rest.indexOf("/");
    return i >= 0 ? rest.slice(i + 1) : rest;
  }

  private aliasOf(image: string): string | undefined {
    return this.imageAliases.get(image)?.[0];
  }

  private sandboxReply(o: { claimId: string; nodeName: string; template: string; claimToken: string }): SandboxReply {
    const templateID = this.displayTemplate(o.template);
    const alias = this.aliasOf(o.template);
    return {
      templateID,
      sandboxID: publicSandboxId(o.claimId),
      clientID: opaqueClientId(o.nodeName),
      envdVersion: this.settings.envdVersion,
      envdAccessToken: deriveAccessToken(this.settings.envdSecret, o.claimToken),
      domain: this.settings.domain,
      ...(alias ? { alias } : {}),
    };
  }

  private listed(o: {
    claimId: string;
    nodeName: string;
    template: string;
    claimedAt: number | undefined;
    deadline: number | undefined;
    paused: boolean;
    cpuCount: number | undefined;
    memoryBytes: number | undefined;
    metadata: Record<string, string> | undefined;
  }): ListedSandbox {
    const startedMs = o.claimedAt ?? this.clock.now();
    const endMs = o.deadline ?? startedMs + this.settings.defaultTimeoutSeconds * 1000;
    const alias = this.aliasOf(o.template);
    return {
      templateID: this.displayTemplate(o.template),
      ...(alias ? { alias } : {}),
      sandboxID: publicSandboxId(o.claimId),
      clientID: opaqueClientId(o.nodeName),
      startedAt: wireTime(startedMs),
      endAt: wireTime(endMs),
      state: o.paused ? "paused" : "running",
      envdVersion: this.settings.envdVersion,
      cpuCount: o.cpuCount ?? 0,
      memoryMB: Math.floor((o.memoryBytes ?? 0) / 1024 / 1024),
      diskSizeMB: 0,
      ...(o.metadata && Object.keys(o.metadata).length ? { metadata: o.metadata } : {}),
      domain: this.settings.domain,
    };
  }

  private detailFromRow(loc: Located, row: SandboxDetail): ListedSandbox {
    const deadline = row.deadline ? parseWireTime(row.deadline) : null;
    const claimedAt = row.claimed_at ? parseWireTime(row.claimed_at) : null;
    return this.listed({
      claimId: loc.claimId,
      nodeName: loc.nodeName,
      template: row.key.template,
      claimedAt: claimedAt ?? undefined,
      deadline: deadline && deadline > 0 ? deadline : undefined,
      paused: isPaused(row),
      cpuCount: row.cpu_count,
      memoryBytes: row.mem_total_bytes,
      metadata: row.metadata,
    });
  }

  // ------------------------------------------------------------------------------------------------------------
  // Lookup helpers

  /** Locate, then read the row live (root): a 404 anywhere is `sandbox "<id>" not found`. */
  private async locateLive(ns: string, id: string, fixed: string): Promise<{ loc: Located; row: SandboxDetail }> {
    const loc = await this.nodes.locate(ns, id);
    if (loc.row) return { loc, row: loc.row };
    try {
      return { loc, row: await this.nodes.client(loc.address).get(loc.claimId) };
    } catch (err) {
      if (isSandboxdError(err) && err.status === 404) this.nodes.forget(ns, loc.claimId);
      throw fromNode(err, id, fixed);
    }
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
      const hit = await this.place({ template: pool.image, net, size: pool.size }, req);
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
    const accessToken = deriveAccessToken(this.settings.envdSecret, reply.token);
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
    this.deps.onClaimed?.(reply.id, address, reply.token);
    return this.sandboxReply({ claimId: reply.id, nodeName, template: placed.template, claimToken: reply.token });
  }

  /**
   * Claim on the fleet: candidates are fresh nodes whose pool of the key has warm VMs in the snapshot; sample two,
   * take the warmer. Undelivered outcomes drop the node and re-sample; other errors end the create. Undefined = no
   * node delivered.
   *
   * When the snapshot shows no warm VM anywhere, nodes whose pool for the key has a warm TARGET are asked anyway
   * (docs/e2b.md "Create"): the snapshot lags refills by up to a poll tick or an inventory publish, and a burst that
   * drained the pool for a moment would otherwise answer 503 for that whole lag. A pool configured with no warm VMs
   * (target 0) is never asked, so an unpooled image still answers 503 rather than cold-booting.
   */
  private async place(key: PoolKey, req: ClaimRequest): Promise<{ reply: ClaimReply; calledAddress: string } | undefined> {
    const nodes = this.nodes.nodes();
    let cands = claimCandidates(nodes, key);
    if (cands.length === 0) {
      cands = nodes
        .filter((n) => n.address && n.pools.some((p) => p.template === key.template && p.net === key.net && p.size === key.size && p.target > 0))
        .map((node) => ({ node, warm: 0 }));
      for (const c of cands) this.deps.fleet.changed?.(c.node.address);
    }
    const resolveTarget = (addr: string): SandboxdClient | undefined => {
      const n = nodeByAddress(this.nodes.nodes(), addr);
      return n ? this.nodes.client(n.address) : undefined;
    };
    while (cands.length > 0) {
      const i = Math.floor(Math.random() * cands.length);
      let pick = i;
      if (cands.length > 1) {
        let j = Math.floor(Math.random() * (cands.length - 1));
        if (j >= i) j++;
        pick = cands[j]!.warm > cands[i]!.warm ? j : i;
      }
      const node = cands[pick]!.node;
      try {
        return { reply: await this.nodes.client(node.address).claim(req, { resolveTarget }), calledAddress: node.address };
      } catch (err) {
        if (provablyUndelivered(err)) {
          this.log.debug({ node: node.name, err }, "claim not delivered; trying another node");
          cands = cands.filter((_, k) => k !== pick);
          continue;
        }
        throw claimFailure(err);
      }
    }
    return undefined;
  }

  /** Nodes holding the namespace's built template `name` (promoted as `e2b/<ns>/<name>`), with its key there. */
  private builtHolders(ns: string, name: string) {
    const ref = `${BUILT_PREFIX}${ns}/${name}`;
    return this.nodes.nodes().flatMap((node) => node.templates.filter((t) => t.template === ref && node.address).map((t) => ({ node, t })));
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
    const holders = this.builtHolders(ns, name);
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
    const { found } = await this.findCheckpoints(ns);
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
    return this.detailFromRow(loc, row);
  }

  list(ns: string, q: ListQuery, paged: boolean): { items: ListedSandbox[]; nextToken: string | undefined } {
    const filters = parseFilters(q, this.resolveTemplateFilter);
    const paging = paged ? parsePaging(q) : undefined;
    const items = entriesOf(this.nodes.nodes(), ns)
      .map(({ node, entry }) =>
        this.listed({
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
    return { status, sandbox: this.sandboxReply({ claimId: loc.claimId, nodeName: loc.nodeName, template: row.key.template, claimToken: row.token }) };
  }

  // ------------------------------------------------------------------------------------------------------------
  // Fork

  async fork(ns: string, id: string, body: { timeout?: number; count?: number }): Promise<SandboxReply[]> {
    const count = body.count ?? 1;
    if (count < 1) throw badRequest("count must be >= 1");
    if (body.timeout !== undefined && body.timeout < 0) throw badRequest("timeout must be >= 0");
    const { loc, row } = await this.locateLive(ns, id, "failed to fork the sandbox");
    if (isPaused(row)) throw new E2bError(409, `sandbox "${id}" is paused; resume it first`);
    const client = this.nodes.client(loc.address);
    let children: ClaimReply[];
    try {
      children = (await client.fork(loc.claimId, { count, ttl_seconds: body.timeout ?? this.settings.defaultTimeoutSeconds, claim_ref_prefix: `${ns}/` }));
    } catch (err) {
      throw fromNode(err, id, "failed to fork the sandbox");
    }
    const results = await mapLimit(children, FANOUT_CONCURRENCY, async (child) => {
      // Children live on the parent's node; reach it the way the fleet does (owner_addr is its own advertise name).
      const address = nodeByAddress(this.nodes.nodes(), child.owner_addr)?.address ?? loc.address;
      const accessToken = deriveAccessToken(this.settings.envdSecret, child.token);
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
      this.deps.onClaimed?.(child.id, address, child.token);
      return this.sandboxReply({ claimId: child.id, nodeName, template: row.key.template, claimToken: child.token });
    });
  }

  // ------------------------------------------------------------------------------------------------------------
  // Snapshots (checkpoints stamped `<ns>/<name>`)

  async createSnapshot(ns: string, id: string, name: string | undefined): Promise<SnapshotInfo> {
    const stamped = `${ns}/${name ?? ""}`;
    if (stamped.length > NAME_BUDGET) {
      throw badRequest(`snapshot name "${name}": at most ${NAME_BUDGET - ns.length - 1} characters in namespace "${ns}"`);
    }
    const loc = await this.nodes.locate(ns, id);
    try {
      const checkpoint = await this.nodes.client(loc.address).checkpoint(loc.claimId, { name: stamped });
      return { snapshotID: checkpoint.id, names: name ? [name] : [] };
    } catch (err) {
      throw fromNode(err, id, "failed to snapshot the sandbox");
    }
  }

  /** The namespace's checkpoints on every fresh node; `failed` counts nodes that did not answer. */
  async findCheckpoints(ns: string): Promise<{ found: { ck: Checkpoint; name: string; address: string }[]; failed: number }> {
    const prefix = `${ns}/`;
    const nodes = this.nodes.nodes().filter((n) => n.address);
    const lists = await mapLimit(nodes, FANOUT_CONCURRENCY, (n) => this.nodes.client(n.address).listCheckpoints());
    const found: { ck: Checkpoint; name: string; address: string }[] = [];
    let failed = 0;
    lists.forEach((l, i) => {
      if (l instanceof Error) {
        failed++;
        return;
      }
      for (const ck of l) {
        if (!ck.name?.startsWith(prefix)) continue;
        found.push({ ck, name: ck.name.slice(prefix.length), address: nodes[i]!.address });
      }
    });
    return { found, failed };
  }

  async listSnapshots(ns: string, q: { sandboxID?: string; name?: string; limit?: string; nextToken?: string }): Promise<{ items: SnapshotInfo[]; nextToken: string | undefined }> {
    const paging = parsePaging({ limit: q.limit, nextToken: undefined });
    const after = q.nextToken ? decodeSnapshotToken(q.nextToken) : undefined;
    const { found } = await this.findCheckpoints(ns);
    const rows = found
      .filter((f) => (q.sandboxID ? sameSandboxId(q.sandboxID, f.ck.sandbox_id) : true))
      .filter((f) => (q.name !== undefined && q.name !== "" ? f.name === q.name : true))
      .map((f) => ({ key: `${f.ck.created_at} ${f.ck.id}`, info: { snapshotID: f.ck.id, names: f.name ? [f.name] : [] } }))
      // Newest first, then id: stable across pages.
      .sort((a, b) => (a.key < b.key ? 1 : a.key > b.key ? -1 : 0));
    const rest = after ? rows.filter((r) => r.key < after) : rows;
    const out = rest.slice(0, paging.limit);
    const nextToken = rest.length > paging.limit ? Buffer.from(out[out.length - 1]!.key).toString("base64url") : undefined;
    return { items: out.map((r) => r.info), nextToken };
  }

  /** `DELETE /templates/{id}`: a built template of the namespace on every holder, else a snapshot id. */
  async deleteTemplate(ns: string, id: string): Promise<void> {
    const built = `${BUILT_PREFIX}${ns}/${id}`;
    const holders = this.nodes.nodes().flatMap((n) => n.templates.filter((t) => t.template === built).map((t) => ({ node: n, t })));
    if (holders.length > 0) {
      const results = await mapLimit(holders, FANOUT_CONCURRENCY, ({ node, t }) =>
        this.nodes.client(node.address).deleteTemplate({ template: t.template, net: t.net, size: t.size }, { noRedirect: true }),
      );
      if (results.some((r) => r instanceof Error)) throw new E2bError(500, "failed to delete the template");
      this.deps.fleet.changed?.();
      return;
    }
    const { found, failed } = await this.findCheckpoints(ns);
    const hit = found.find((f) => f.ck.id === id);
    if (!hit) {
      if (failed > 0) throw new E2bError(500, "failed to delete the snapshot: a node did not answer");
      throw new E2bError(404, "snapshot not found");
    }
    try {
      await this.nodes.client(hit.address).deleteCheckpoint(id);
    } catch {
      throw new E2bError(500, "failed to delete the snapshot");
    }
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
        { method: "GET", path: "/metrics", headers: { "x-access-token": deriveAccessToken(this.settings.envdSecret, row.token) }, timeoutMs: METRICS_TIMEOUT_MS, maxBytes: METRICS_MAX_BYTES },
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

  // ------------------------------------------------------------------------------------------------------------
  // Templates

  /** `GET /templates/aliases/{alias}`. */
  templateAlias(ns: string, alias: string): { templateID: string; public: boolean } {
    const a = this.settings.aliases.get(alias);
    if (a) return { templateID: a.image, public: true };
    const nodes = this.nodes.nodes();
    const built = `${BUILT_PREFIX}${ns}/${alias}`;
    if (advertisesImage(nodes, alias) || nodes.some((n) => n.templates.some((t) => t.template === built))) return { templateID: alias, public: true };
    throw new E2bError(404, `template alias "${alias}" not found`);
  }

  /** Distinct advertised pool images, then the namespace's built templates. */
  templates(ns: string) {
    const nodes = this.nodes.nodes();
    const images = [...new Set(nodes.flatMap((n) => n.pools.map((p) => p.template)))].sort();
    const base = {
      cpuCount: 0,
      memoryMB: 0,
      diskSizeMB: 0,
      public: true,
      createdBy: null,
      lastSpawnedAt: null,
      spawnCount: 0,
      envdVersion: this.settings.envdVersion,
      buildStatus: "ready" as const,
    };
    const out = images.map((image) => ({
      ...base,
      templateID: image,
      buildID: image,
      aliases: this.imageAliases.get(image) ?? [],
      names: [image],
      createdAt: "",
      updatedAt: "",
      buildCount: 1,
    }));
    const prefix = `${BUILT_PREFIX}${ns}/`;
    const built = new Map<string, { digests: Set<string>; newest: number }>();
    for (const n of nodes) {
      for (const t of n.templates) {
        if (!t.template.startsWith(prefix)) continue;
        const rec = built.get(t.template) ?? { digests: new Set<string>(), newest: 0 };
        if (t.contentDigest) rec.digests.add(t.contentDigest);
        rec.newest = Math.max(rec.newest, t.createdAt ?? 0);
        built.set(t.template, rec);
      }
    }
    for (const [template, rec] of [...built].sort()) {
      const name = template.slice(prefix.length);
      const when = rec.newest ? wireTime(rec.newest) : "";
      out.push({ ...base, templateID: name, buildID: buildIdOf([...rec.digests][0] ?? name), aliases: [name], names: [name], createdAt: when, updatedAt: when, buildCount: rec.digests.size });
    }
    return out;
  }

  /** `GET /templates/{id}`: a built template's builds (one per content digest); pool images are 404 with a reason. */
  templateDetail(ns: string, id: string) {
    if (`${BUILT_PREFIX}${ns}/${id}`.length > NAME_BUDGET) throw badRequest(`template name "${id}": at most ${NAME_BUDGET - BUILT_PREFIX.length - ns.length - 1} characters in namespace "${ns}"`);
    const holders = this.builtHolders(ns, id);
    if (holders.length === 0) {
      if (advertisesImage(this.nodes.nodes(), id)) throw new E2bError(404, `template "${id}" is a pool image, not a built template`);
      throw templateNotFound(id);
    }
    const byDigest = new Map<string, { createdAt: number; size: string }>();
    for (const { t } of holders) {
      const digest = t.contentDigest ?? "";
      const prev = byDigest.get(digest);
      if (!prev || (t.createdAt ?? 0) > prev.createdAt) byDigest.set(digest, { createdAt: t.createdAt ?? 0, size: t.size });
    }
    const builds = [...byDigest].sort((a, b) => b[1].createdAt - a[1].createdAt);
    const newest = builds[0]![1].createdAt;
    const tier = SIZE_TIERS[builds[0]![1].size as keyof typeof SIZE_TIERS];
    return {
      templateID: id,
      public: true,
      aliases: [id],
      names: [id],
      createdAt: wireTime(Math.min(...builds.map((b) => b[1].createdAt))),
      updatedAt: wireTime(newest),
      lastSpawnedAt: null,
      spawnCount: 0,
      builds: builds.map(([digest, b]) => ({
        buildID: buildIdOf(digest),
        status: "ready",
        createdAt: wireTime(b.createdAt),
        updatedAt: wireTime(b.createdAt),
        finishedAt: wireTime(b.createdAt),
        cpuCount: tier?.cpu_count ?? 0,
        memoryMB: Math.floor((tier?.mem_total_bytes ?? 0) / 1024 / 1024),
        envdVersion: this.settings.envdVersion,
      })),
    };
  }

  // ------------------------------------------------------------------------------------------------------------
  // Tags of built templates: sandboxd template labels `{tag: contentDigest}` on every holder

  /** The holders of a built template, its current (newest) digest, and the labels a current holder reports live. */
  private async tagState(ns: string, name: string) {
    const holders = this.builtHolders(ns, name);
    if (holders.length === 0) throw templateNotFound(name);
    const current = [...holders].sort((a, b) => (b.t.createdAt ?? 0) - (a.t.createdAt ?? 0))[0]!;
    const digest = current.t.contentDigest ?? "";
    // Read the labels live from a current holder: the snapshot may lag a tag written a moment ago.
    let labels: Record<string, string> = { ...(current.t.labels ?? {}) };
    try {
      const info = await this.nodes.client(current.node.address).info();
      const live = info.templates.find((t) => t.key.template === current.t.template && t.content_digest === digest);
      if (live) labels = { ...(live.labels ?? {}) };
    } catch {
      // the snapshot's labels are the best we have
    }
    return { holders, digest, labels };
  }

  private async writeLabels(holders: ReturnType<E2bSurface["builtHolders"]>, labels: Record<string, string>): Promise<void> {
    const results = await mapLimit(holders, FANOUT_CONCURRENCY, ({ node, t }) =>
      this.nodes.client(node.address).putTemplateLabels({ template: t.template, net: t.net, size: t.size }, labels),
    );
    if (results.some((r) => r instanceof Error)) throw new E2bError(500, "failed to write the template tags");
    this.deps.fleet.changed?.();
  }

  /** `POST /templates/tags {target: "name" | "name:tag", tags}` -> 201 `{tags, buildID}`. */
  async assignTags(ns: string, target: string, tags: string[]): Promise<{ tags: string[]; buildID: string }> {
    if (tags.length === 0 || tags.some((t) => t.trim() === "")) throw badRequest("tags: give at least one non-empty tag");
    const colon = target.lastIndexOf(":");
    const name = colon > 0 ? target.slice(0, colon) : target;
    const fromTag = colon > 0 ? target.slice(colon + 1) : "default";
    const { holders, digest: current, labels } = await this.tagState(ns, name);
    let digest = current;
    if (fromTag !== "default") {
      const tagged = labels[fromTag];
      if (!tagged || !holders.some(({ t }) => t.contentDigest === tagged)) throw new E2bError(404, `tag "${fromTag}" of template "${name}" not found`);
      digest = tagged;
    }
    const next = { ...labels };
    for (const tag of tags) next[tag] = digest;
    await this.writeLabels(holders, next);
    return { tags, buildID: buildIdOf(digest) };
  }

  /** `DELETE /templates/tags {name, tags}` -> 204. */
  async removeTags(ns: string, name: string, tags: string[]): Promise<void> {
    if (tags.length === 0 || tags.some((t) => t.trim() === "")) throw badRequest("tags: give at least one non-empty tag");
    const { holders, labels } = await this.tagState(ns, name);
    const next = { ...labels };
    for (const tag of tags) delete next[tag];
    await this.writeLabels(holders, next);
  }

  /** `GET /templates/{id}/tags`: tags whose digest some holder still reports. */
  async templateTags(ns: string, name: string): Promise<{ tag: string; buildID: string; createdAt: string }[]> {
    const { holders, labels } = await this.tagState(ns, name);
    const created = new Map<string, number>();
    for (const { t } of holders) if (t.contentDigest) created.set(t.contentDigest, Math.max(created.get(t.contentDigest) ?? 0, t.createdAt ?? 0));
    return Object.entries(labels)
      .filter(([, digest]) => created.has(digest))
      .map(([tag, digest]) => ({ tag, buildID: buildIdOf(digest), createdAt: wireTime(created.get(digest)!) }))
      .sort((a, b) => (a.tag < b.tag ? -1 : a.tag > b.tag ? 1 : 0));
  }

}

function refuseOptions(b: NewSandbox): void {
  const nonEmpty = (v: unknown) => v !== undefined && v !== null && !(Array.isArray(v) && v.length === 0) && !(typeof v === "object" && !Array.isArray(v) && Object.keys(v as object).length === 0);
  if (b.secure === false) throw badRequest("secure: false is not supported: every sandbox requires its envd access token");
  if (b.autoPause === true && b.allow_internet_access === true) throw badRequest("autoPause cannot be combined with allow_internet_access: egress-lane sandboxes cannot be paused");
  if (nonEmpty(b.network)) throw badRequest("network rules are not supported");
  if (nonEmpty(b.volumeMounts)) throw badRequest("volumeMounts are not supported");
  if (b.autoPauseMemory !== undefined) throw badRequest("autoPauseMemory is not supported: an auto-paused sandbox always keeps its memory");
  if (b.autoResume?.enabled === false) throw badRequest("autoResume: {enabled: false} is not supported: data-plane traffic with a valid token always wakes a paused sandbox here");
  if (nonEmpty(b.mcp)) throw badRequest("mcp is not supported");
  if (nonEmpty(b.iam)) throw badRequest("iam is not supported");
}

/** A claim that was delivered but failed: the node's 400/409 pass through; anything else is a fixed 500. */
function claimFailure(err: unknown): E2bError {
  if (isSandboxdError(err) && (err.status === 400 || err.status === 409)) return new E2bError(err.status, err.serverMessage || "the node refused the claim");
  return new E2bError(500, "failed to claim a sandbox");
}

function decodeSnapshotToken(token: string): string {
  const text = /^[A-Za-z0-9_-]+$/.test(token) ? Buffer.from(token, "base64url").toString("utf8") : "";
  if (!/^\S+ ck_[0-9a-f]+$/.test(text)) throw badRequest("invalid nextToken");
  return text;
}

/** UUIDv5 (RFC 9562) of `name` in namespace `ns` (both as bytes/strings): identical across replicas. */
function uuidV5(ns: Uint8Array, name: string): string {
  const h = createHash("sha1").update(ns).update(name).digest();
  h[6] = (h[6]! & 0x0f) | 0x50;
  h[8] = (h[8]! & 0x3f) | 0x80;
  const hex = h.subarray(0, 16).toString("hex");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
const uuidBytes = (u: string) => Buffer.from(u.replace(/-/g, ""), "hex");
/** The URL namespace of RFC 9562, then the surface's own namespace under it. */
const BUILD_ID_NAMESPACE = uuidBytes(uuidV5(uuidBytes("6ba7b811-9dad-11d1-80b4-00c04fd430c8"), "https://github.com/cocoonstack/sandbox-operator/e2b"));

/** A built template's buildID: UUIDv5 of its content digest (the same on every replica). */
export function buildIdOf(digest: string): string {
  return uuidV5(BUILD_ID_NAMESPACE, digest);
}

/** envd `GET /envs` (a built template's environment), for merging a create's envVars over it. */
async function readEnvdEnv(t: { address: string; claimId: string; rootToken: string }): Promise<Record<string, string>> {
  const reply = await envdCall(t, { method: "GET", path: "/envs", timeoutMs: INIT_TIMEOUT_MS });
  if (reply.status !== 200) throw new Error(`envd /envs answered ${reply.status}`);
  const parsed: unknown = JSON.parse(reply.body.toString("utf8"));
  if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) throw new Error("envd /envs is not an object");
  return Object.fromEntries(Object.entries(parsed as Record<string, unknown>).filter((e): e is [string, string] => typeof e[1] === "string"));
}
