// Fork (docs/e2b.md "Fork"): all-or-nothing. The parent's node clones it `count` times; each child gets its own
// access token (instance metadata `accessTokenHash`, then envd /init); if any child fails, every child is released.
import type { Clock } from "../clock/index.ts";
import { FANOUT_CONCURRENCY, mapLimit, nodeByAddress } from "../fleet/index.ts";
import type { Logger } from "../log/index.ts";
import { parseWireTime, type ClaimReply, type SandboxDetail } from "../sandboxd/index.ts";
import { initEnvd } from "./envd.ts";
import { E2bError, badRequest, fromNode } from "./errors.ts";
import type { LiveLookup } from "./lookup.ts";
import type { Located, NodeAccess } from "./nodes.ts";
import type { OwnWrites } from "./own-writes.ts";
import { isPaused, type Renderer } from "./render.ts";
import type { SandboxReply } from "./schemas.ts";
import type { Admission, E2bSettings, SandboxEvents } from "./settings.ts";
import { accessTokenHash, envdAccessToken } from "./tokens.ts";

export interface ForkDeps {
  settings: Pick<E2bSettings, "envdSecret" | "rootToken" | "defaultTimeoutSeconds">;
  nodes: Pick<NodeAccess, "nodes" | "client" | "nodeNameFor" | "remember">;
  lookup: Pick<LiveLookup, "read">;
  quotas: Admission;
  render: Pick<Renderer, "sandboxReply" | "servesPublicly">;
  ownWrites: Pick<OwnWrites, "created">;
  events: SandboxEvents;
  log: Logger;
  clock: Clock;
}

export class Forks {
  constructor(private readonly d: ForkDeps) {}

  async fork(ns: string, id: string, body: { timeout?: number; count?: number }): Promise<SandboxReply[]> {
    const count = body.count ?? 1;
    if (count < 1) throw badRequest("count must be >= 1");
    if (body.timeout !== undefined && body.timeout < 0) throw badRequest("timeout must be >= 0");
    const { loc, row } = await this.d.lookup.read(ns, id, "failed to fork the sandbox");
    if (isPaused(row)) throw new E2bError(409, `sandbox "${id}" is paused; resume it first`);
    const settle = this.d.quotas.admit(ns, "fork", count);
    try {
      return await this.forkAdmitted(ns, id, loc, row, count, body.timeout);
    } finally {
      settle();
    }
  }

  /** Children live on the parent's node; reach it the way the fleet does (owner_addr is its own advertise name). */
  private addressOf(child: ClaimReply, parent: Located): string {
    return nodeByAddress(this.d.nodes.nodes(), child.owner_addr)?.address ?? parent.address;
  }

  private async forkAdmitted(ns: string, id: string, loc: Located, row: SandboxDetail, count: number, timeout: number | undefined): Promise<SandboxReply[]> {
    const { settings, nodes, log, clock } = this.d;
    let children: ClaimReply[];
    try {
      children = await nodes.client(loc.address).fork(loc.claimId, { count, ttl_seconds: timeout ?? settings.defaultTimeoutSeconds, claim_ref_prefix: `${ns}/` });
    } catch (err) {
      throw fromNode(err, id, "failed to fork the sandbox");
    }
    const results = await mapLimit(children, FANOUT_CONCURRENCY, async (child) => {
      const address = this.addressOf(child, loc);
      const accessToken = envdAccessToken(settings.envdSecret, child.id, child.token);
      await nodes.client(address).putInstanceMetadata(child.id, { accessTokenHash: accessTokenHash(accessToken) });
      await initEnvd({ address, claimId: child.id, rootToken: settings.rootToken }, { accessToken, timestamp: new Date(clock.now()).toISOString() });
      return address;
    });
    if (results.some((r) => r instanceof Error)) {
      log.warn({ sandbox: loc.claimId, err: results.find((r) => r instanceof Error) }, "fork child initialisation failed; releasing every child");
      await Promise.all(children.map((c) => nodes.client(this.addressOf(c, loc)).release(c.id).catch(() => undefined)));
      throw new E2bError(500, "failed to fork the sandbox");
    }
    this.d.events.changed(loc.address);
    const now = clock.now();
    return children.map((child, k) => {
      const address = results[k] as string;
      const nodeName = nodes.nodeNameFor(address);
      nodes.remember(ns, child.id, address, nodeName);
      const deadline = parseWireTime(child.deadline);
      this.d.ownWrites.created(ns, {
        claimId: child.id,
        nodeName,
        template: row.key.template,
        claimedAt: now,
        deadline: deadline && deadline > 0 ? deadline : undefined,
        paused: false,
        cpuCount: row.cpu_count,
        memoryBytes: row.mem_total_bytes,
        metadata: row.metadata,
      });
      // A fork child inherits its parent's metadata, the public-ports stamp included.
      this.d.events.claimed(child.id, address, child.token, ns, this.d.render.servesPublicly(row.metadata));
      return this.d.render.sandboxReply({ claimId: child.id, nodeName, template: row.key.template, claimToken: child.token, metadata: row.metadata });
    });
  }
}
