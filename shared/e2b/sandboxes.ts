// One sandbox's reads and lifecycle verbs (docs/e2b.md "Read, list, kill, lease", "Pause and connect"): get, list,
// kill, timeout/refresh, pause, connect/resume, and the visibility check of the log routes. Create is create.ts,
// fork fork.ts, metrics sandbox-metrics.ts. Every node call uses the fleet root token and the raw claim id.
import type { Clock } from "../clock/index.ts";
import { parseWireTime } from "../sandboxd/index.ts";
import { envdCall } from "./envd.ts";
import { E2bError, badRequest, fromNode, sandboxNotFound } from "./errors.ts";
import { pauseRefusal } from "./lifecycle-options.ts";
import { networkUpdateRefusal } from "./refused-options.ts";
import { matches, page, parseFilters, parsePaging } from "./list.ts";
import { claimedAtOf, type LiveLookup } from "./lookup.ts";
import type { NodeAccess } from "./nodes.ts";
import type { OwnWrites } from "./own-writes.ts";
import { isPaused, type Renderer } from "./render.ts";
import type { ListQuery, ListedSandbox, SandboxReply } from "./schemas.ts";
import type { Admission, E2bSettings, SandboxEvents } from "./settings.ts";
import type { TokenForms } from "./token-forms.ts";

/** How long a strict pause (`requireHealthyGuest`) waits for the guest agent's `GET /health`. */
export const GUEST_HEALTH_TIMEOUT_MS = 5_000;

export interface PauseOptions {
  memory?: boolean;
  /** Python `pause(strict=True)`: refuse (503, the sandbox keeps running) when the guest agent does not answer. */
  requireHealthyGuest?: boolean;
}

export interface SandboxesDeps {
  settings: Pick<E2bSettings, "aliases" | "defaultTimeoutSeconds" | "rootToken">;
  nodes: Pick<NodeAccess, "nodes" | "locate" | "client" | "forget" | "markReleased">;
  lookup: Pick<LiveLookup, "read">;
  /** A wake takes a start of the namespace's rate. */
  quotas: Admission;
  render: Pick<Renderer, "detailFromRow" | "listed" | "sandboxReply">;
  tokenForms: Pick<TokenForms, "accessTokenFor">;
  /** This replica's recent writes, laid over the snapshot (own-writes.ts). */
  ownWrites: Pick<OwnWrites, "rows" | "isKilled" | "killed" | "paused" | "resumed">;
  events: SandboxEvents;
  clock: Clock;
}

export class Sandboxes {
  /** Health probes in flight, by node and claim: concurrent strict pauses of one sandbox share one (guestAnswers). */
  private readonly probes = new Map<string, Promise<boolean>>();

  constructor(private readonly d: SandboxesDeps) {}

  /** The `template` list filter: an alias resolves to its image. */
  resolveTemplateFilter = (t: string): string => this.d.settings.aliases.get(t)?.image ?? t;

  async get(ns: string, id: string): Promise<ListedSandbox> {
    if (this.d.ownWrites.isKilled(ns, id)) throw sandboxNotFound(id);
    const { loc, row } = await this.d.lookup.read(ns, id, "failed to read the sandbox");
    return this.d.render.detailFromRow(loc, row);
  }

  list(ns: string, q: ListQuery, paged: boolean): { items: ListedSandbox[]; nextToken: string | undefined } {
    const filters = parseFilters(q, this.resolveTemplateFilter);
    const paging = paged ? parsePaging(q) : undefined;
    const items = this.d.ownWrites
      .rows(this.d.nodes.nodes(), ns)
      .map((row) => this.d.render.listed(row))
      .filter((it) => matches(it, filters));
    if (!paging) return { items, nextToken: undefined };
    return page(items, paging);
  }

  async kill(ns: string, id: string): Promise<void> {
    const { nodes, events, ownWrites } = this.d;
    // Killed here a moment ago: 404 at once, though the snapshot may list it a while longer.
    if (ownWrites.isKilled(ns, id)) throw sandboxNotFound(id);
    const loc = await nodes.locate(ns, id);
    try {
      // "already gone" (reaped, or killed through another replica, while the view still lists it) is a 204 as
      // well (spec acceptance 28): only this replica's own kills are known to it at once.
      await nodes.client(loc.address).release(loc.claimId);
    } catch {
      throw new E2bError(500, "failed to release the sandbox");
    }
    nodes.forget(ns, loc.claimId);
    nodes.markReleased(loc.claimId);
    ownWrites.killed(ns, loc.claimId);
    events.released(loc.claimId);
    events.changed(loc.address);
  }

  async setTimeout(ns: string, id: string, seconds: number): Promise<void> {
    if (seconds < 0) throw badRequest("timeout must be >= 0");
    const loc = await this.d.nodes.locate(ns, id);
    try {
      await this.d.nodes.client(loc.address).renew(loc.claimId, seconds);
    } catch (err) {
      throw fromNode(err, id, "failed to extend the sandbox lease");
    }
  }

  async refresh(ns: string, id: string, duration: number | undefined): Promise<void> {
    await this.setTimeout(ns, id, duration !== undefined && duration > 0 ? duration : this.d.settings.defaultTimeoutSeconds);
  }

  async pause(ns: string, id: string, o: PauseOptions): Promise<void> {
    const refused = pauseRefusal(o.memory);
    if (refused) throw refused;
    const { loc, row } = await this.d.lookup.read(ns, id, "failed to pause the sandbox");
    if (isPaused(row)) throw new E2bError(409, `sandbox "${id}" is already paused`);
    if (row.key.net === "egress") {
      throw badRequest(`sandbox "${id}" has internet access (egress lane), which cannot be paused: its network attachment does not survive hibernation`);
    }
    if (o.requireHealthyGuest === true && !(await this.guestAnswers(loc.address, loc.claimId))) {
      // e2b's answer to a strict pause of an unresponsive guest: 503, nothing changed (Python: ServiceBusyException).
      throw new E2bError(
        503,
        `sandbox "${id}" was not paused: its guest agent (envd) did not answer a health check within ${GUEST_HEALTH_TIMEOUT_MS / 1000} s and requireHealthyGuest (strict) is set; the sandbox keeps running, retry later`,
      );
    }
    try {
      await this.d.nodes.client(loc.address).hibernate(loc.claimId);
    } catch (err) {
      throw fromNode(err, id, "failed to pause the sandbox");
    }
    this.d.ownWrites.paused(ns, loc.claimId);
    this.d.events.changed(loc.address);
  }

  /**
   * The guest agent answers `GET /health` (204) through the node's passive relay (root token: no wake, no activity)
   * within GUEST_HEALTH_TIMEOUT_MS. Any other answer, a refused relay or silence is "does not answer". Concurrent
   * strict pauses of one sandbox share one probe: a burst of them at a wedged guest holds one node connection for the
   * probe's time, not one each.
   */
  private guestAnswers(address: string, claimId: string): Promise<boolean> {
    const key = `${address}\n${claimId}`;
    let probe = this.probes.get(key);
    if (!probe) {
      probe = this.probeGuest(address, claimId).finally(() => this.probes.delete(key));
      this.probes.set(key, probe);
    }
    return probe;
  }

  private async probeGuest(address: string, claimId: string): Promise<boolean> {
    try {
      const r = await envdCall({ address, claimId, rootToken: this.d.settings.rootToken }, { method: "GET", path: "/health", timeoutMs: GUEST_HEALTH_TIMEOUT_MS, maxBytes: 4096 });
      return r.status === 204 || r.status === 200;
    } catch {
      return false;
    }
  }

  /**
   * `PUT /sandboxes/{id}/network`: a visible sandbox; every egress field refused by name (refused-options.ts); an
   * empty body (no per-sandbox rule, what every sandbox here has) or the sandbox's own lane changes nothing.
   */
  async updateNetwork(ns: string, id: string, body: Record<string, unknown>): Promise<void> {
    if (this.d.ownWrites.isKilled(ns, id)) throw sandboxNotFound(id);
    const { row } = await this.d.lookup.read(ns, id, "failed to read the sandbox");
    const refused = networkUpdateRefusal(body, row.key.net === "egress");
    if (refused) throw refused;
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
    let { loc, row } = await this.d.lookup.read(ns, id, fixed);
    const client = this.d.nodes.client(loc.address);
    let status: 200 | 201 = 200;
    try {
      if (isPaused(row)) {
        // Waking restores a VM like a create does: it takes a start of the namespace's rate (it adds no sandbox).
        this.d.quotas.admit(ns, "resume");
        await client.wake(loc.claimId);
        row = await client.get(loc.claimId);
        status = 201;
        this.d.ownWrites.resumed(ns, loc.claimId);
        this.d.events.changed(loc.address);
      } else if (kind === "resume") {
        throw new E2bError(409, `sandbox "${id}" is already running`);
      }
      const ttl = body.timeout ?? this.d.settings.defaultTimeoutSeconds;
      const deadline = row.deadline ? parseWireTime(row.deadline) : null;
      const left = deadline ? Math.ceil((deadline - this.d.clock.now()) / 1000) : 0;
      if (ttl > left || body.autoPause !== undefined) {
        const onExpire = body.autoPause === undefined ? undefined : body.autoPause ? "archive" : "destroy";
        await client.renew(loc.claimId, Math.max(ttl, left), onExpire ? { onExpire } : {});
      }
    } catch (err) {
      throw fromNode(err, id, fixed);
    }
    if (!row.token) throw new E2bError(500, fixed);
    const accessToken = await this.d.tokenForms.accessTokenFor(loc.address, loc.claimId, row.token, claimedAtOf(row));
    return { status, sandbox: this.d.render.sandboxReply({ claimId: loc.claimId, nodeName: loc.nodeName, template: row.key.template, claimToken: row.token, accessToken, metadata: row.metadata }) };
  }

  /** Logs: no log storage exists; a visible sandbox answers empty arrays, an unknown one 404. */
  async assertVisible(ns: string, id: string): Promise<void> {
    await this.d.lookup.read(ns, id, "failed to read the sandbox");
  }
}
