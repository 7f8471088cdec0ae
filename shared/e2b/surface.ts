// The e2b surface's composition root (docs/e2b.md "Layout"): it builds the shared pieces (node access, the live
// lookup, quotas, rendering, token forms) and hands each per-resource module only the part it needs. app.ts parses
// and authenticates, then calls the modules with the caller's namespace; nothing here knows HTTP.
//   create.ts          create          sandboxes.ts  get, list, kill, timeout, refresh, pause, connect, logs
//   fork.ts            fork            snapshots.ts  snapshots and DELETE /templates/{id}
//   sandbox-metrics.ts metrics         templates.ts  template reads and tags
import { type Clock, realClock } from "../clock/index.ts";
import type { Logger } from "../log/index.ts";
import { SandboxCreator } from "./create.ts";
import { Forks } from "./fork.ts";
import { IdempotentCreates } from "./idempotency.ts";
import { LiveLookup } from "./lookup.ts";
import { NodeAccess } from "./nodes.ts";
import { OwnWrites } from "./own-writes.ts";
import { NamespaceQuotas } from "./quotas.ts";
import { Renderer } from "./render.ts";
import { SandboxMetrics } from "./sandbox-metrics.ts";
import { Sandboxes } from "./sandboxes.ts";
import type { NewSandbox, SandboxReply } from "./schemas.ts";
import { eventsOf, type E2bDeps, type E2bSettings, type SandboxEvents } from "./settings.ts";
import { Snapshots } from "./snapshots.ts";
import { TemplateCatalog } from "./templates.ts";
import { TokenForms } from "./token-forms.ts";

export type { E2bDeps, E2bSettings, SandboxEvents } from "./settings.ts";

export class E2bSurface {
  readonly nodes: NodeAccess;
  readonly lookup: LiveLookup;
  readonly ownWrites: OwnWrites;
  readonly idempotency: IdempotentCreates;
  readonly quotas: NamespaceQuotas;
  readonly render: Renderer;
  readonly tokenForms: TokenForms;
  readonly events: SandboxEvents;
  readonly clock: Clock;
  readonly log: Logger;

  readonly creator: SandboxCreator;
  readonly sandboxes: Sandboxes;
  readonly forks: Forks;
  readonly metrics: SandboxMetrics;
  readonly snapshots: Snapshots;
  readonly catalog: TemplateCatalog;

  constructor(
    readonly settings: E2bSettings,
    deps: E2bDeps,
  ) {
    const clock = (this.clock = deps.clock ?? realClock);
    const log = (this.log = deps.log);
    const nodes = (this.nodes = new NodeAccess(deps.fleet, settings.rootToken, log, clock));
    const imageAliases = new Map<string, string[]>();
    for (const [alias, t] of settings.aliases) {
      const list = imageAliases.get(t.image) ?? [];
      list.push(alias);
      imageAliases.set(t.image, list.sort());
    }
    const render = (this.render = new Renderer(settings, imageAliases, clock));
    const tokenForms = (this.tokenForms = new TokenForms(settings.envdSecret, settings.rootToken, clock));
    const events = (this.events = eventsOf(deps));
    const ownWrites = (this.ownWrites = new OwnWrites(clock));
    const lookup = (this.lookup = new LiveLookup(nodes, (ns, claimId) => ownWrites.killed(ns, claimId)));
    const quotas = (this.quotas = new NamespaceQuotas({
      limits: settings.quotas ?? new Map(),
      defaults: settings.defaultQuota ?? { maxSandboxes: 0, createsPerSecond: 0, maxSnapshots: 0, snapshotsPerSecond: 0 },
      namespaces: settings.namespaces ?? [settings.namespace],
      live: (ns) => nodes.liveCount(ns),
      clock,
      ...(deps.metricsRegistry ? { registry: deps.metricsRegistry } : {}),
    }));
    this.catalog = new TemplateCatalog(nodes, settings.aliases, imageAliases, settings.envdVersion);
    this.snapshots = new Snapshots(nodes, quotas);
    const idempotency = (this.idempotency = new IdempotentCreates({ nodes, ownWrites, tokenForms, render, clock }));
    this.creator = new SandboxCreator({ settings, nodes, catalog: this.catalog, snapshots: this.snapshots, quotas, render, ownWrites, idempotency, events, log, clock });
    this.sandboxes = new Sandboxes({ settings, nodes, lookup, quotas, render, tokenForms, ownWrites, events, clock });
    this.forks = new Forks({ settings, nodes, lookup, quotas, render, ownWrites, events, log, clock });
    this.metrics = new SandboxMetrics({ settings, lookup, tokenForms, clock });
  }

  /** Create in `ns` (create.ts); kept on the root for callers that drive the surface without HTTP. */
  create(ns: string, body: NewSandbox, idempotencyKey?: string): Promise<SandboxReply> {
    return this.creator.create(ns, body, idempotencyKey);
  }
}
