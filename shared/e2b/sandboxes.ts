// One sandbox's reads and lifecycle verbs (docs/e2b.md "Read, list, kill, lease", "Pause and connect"): get, list,
// kill, timeout/refresh, pause, connect/resume, and the visibility check of the log routes. Create is create.ts,
// fork fork.ts, metrics sandbox-metrics.ts. Every node call uses the fleet root token and the raw claim id.
import type { Clock } from "../clock/index.ts";
import { parseWireTime } from "../sandboxd/index.ts";
import { E2bError, badRequest, fromNode, sandboxNotFound } from "./errors.ts";
import { pauseRefusal } from "./lifecycle-options.ts";
import { matches, page, parseFilters, parsePaging } from "./list.ts";
import { claimedAtOf, type LiveLookup } from "./lookup.ts";
import type { NodeAccess } from "./nodes.ts";
import type { OwnWrites } from "./own-writes.ts";
import { isPaused, type Renderer } from "./render.ts";
import type { ListQuery, ListedSandbox, SandboxReply } from "./schemas.ts";
import type { Admission, E2bSettings, SandboxEvents } from "./settings.ts";
import type { TokenForms } from "./token-forms.ts";

export interface SandboxesDeps {
  settings: Pick<E2bSettings, "aliases" | "defaultTimeoutSeconds">;
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

  async pause(ns: string, id: string, memory: boolean | undefined): Promise<void> {
    const refused = pauseRefusal(memory);
    if (refused) throw refused;
    const { loc, row } = await this.d.lookup.read(ns, id, "failed to pause the sandbox");
    if (isPaused(row)) throw new E2bError(409, `sandbox "${id}" is already paused`);
    if (row.key.net === "egress") {
      throw badRequest(`sandbox "${id}" has internet access (egress lane), which cannot be paused: its network attachment does not survive hibernation`);
    }
    try {
      await this.d.nodes.client(loc.address).hibernate(loc.claimId);
    } catch (err) {
      throw fromNode(err, id, "failed to pause the sandbox");
    }
    this.d.ownWrites.paused(ns, loc.claimId);
    this.d.events.changed(loc.address);
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
