// Finding and calling the node that holds a sandbox (docs/e2b.md "Owner lookup"). Order, first hit wins:
//   1. the node remembered for (namespace, claim id) since this process claimed it;
//   2. the fleet snapshot's entries (fresh nodes only) of the caller's namespace;
//   3. a live `GET /v1/sandboxes/{claimId}` on every fresh node (≤16 at once, the rest cancelled on the first hit),
//      accepted only when the row's claim_ref puts it in the caller's namespace.
// A miss is 404 `sandbox "<id>" not found`, the same answer as "exists in another namespace".
import { type Clock, realClock } from "../clock/index.ts";
import type { Logger } from "../log/index.ts";
import type { FleetNode, FleetSource } from "../fleet/index.ts";
import { FANOUT_CONCURRENCY, firstHit } from "../fleet/index.ts";
import { findEntry, namespaceOfName, nodeByAddress } from "../fleet/index.ts";
import { SandboxdClient } from "../sandboxd/index.ts";
import type { SandboxDetail } from "../sandboxd/index.ts";
import { sandboxNotFound } from "./errors.ts";
import { claimIdOf, publicSandboxId } from "./ids.ts";

/** The per-node budget of one live probe read. */
const PROBE_TIMEOUT_MS = 3_000;

export interface Located {
  claimId: string;
  publicId: string;
  /** The node's sandboxd address. */
  address: string;
  /** The node's identity (for the opaque clientID). */
  nodeName: string;
  /** The root read, when the lookup already made one (live probe). */
  row?: SandboxDetail;
}

interface Remembered {
  address: string;
  nodeName: string;
  /** Epoch ms after which the fleet view is trusted to list it (the entry is then dropped). */
  until: number;
}

/**
 * How long this process remembers the node of a claim it made: long enough for the fleet view to list it (one poll
 * tick or inventory publish, 30 s by default), short enough that sandboxes that simply expire do not pile up.
 */
export const REMEMBER_MS = 10 * 60_000;

export class NodeAccess {
  private readonly clients = new Map<string, SandboxdClient>();
  private readonly remembered = new Map<string, Remembered>();
  private pruneAt = 1000;

  constructor(
    readonly fleet: FleetSource,
    private readonly rootToken: string,
    private readonly log: Logger,
    private readonly clock: Clock = realClock,
  ) {}

  nodes(): readonly FleetNode[] {
    return this.fleet.nodes();
  }

  /** One client per node address, with the fleet root token. */
  client(address: string): SandboxdClient {
    let c = this.clients.get(address);
    if (!c) {
      c = new SandboxdClient({ baseUrl: SandboxdClient.baseUrlFor(address), token: this.rootToken, log: this.log });
      this.clients.set(address, c);
    }
    return c;
  }

  /** A redirect target or `owner_addr` -> the node it is (by address), or a name made of the address. */
  nodeNameFor(address: string): string {
    return nodeByAddress(this.nodes(), address)?.name ?? address;
  }

  remember(namespace: string, claimId: string, address: string, nodeName: string): void {
    const now = this.clock.now();
    // Prune on the way in, at most once per thousand inserts' worth of growth: O(1) amortised, bounded by the
    // claims made in one REMEMBER_MS window.
    if (this.remembered.size >= this.pruneAt) {
      for (const [k, r] of this.remembered) if (r.until <= now) this.remembered.delete(k);
      this.pruneAt = this.remembered.size + 1000;
    }
    this.remembered.set(`${namespace}\0${claimId}`, { address, nodeName, until: now + REMEMBER_MS });
  }

  forget(namespace: string, claimId: string): void {
    this.remembered.delete(`${namespace}\0${claimId}`);
  }

  async locate(namespace: string, requestedId: string): Promise<Located> {
    const claimId = claimIdOf(requestedId);
    const publicId = publicSandboxId(claimId);
    const nodes = this.nodes();
    // A remembered node counts only while it is fresh: a stale node's sandboxes answer 404 everywhere.
    const mem = this.remembered.get(`${namespace}\0${claimId}`);
    if (mem && mem.until > this.clock.now() && nodes.some((n) => n.name === mem.nodeName)) {
      return { claimId, publicId, address: mem.address, nodeName: mem.nodeName };
    }
    const hit = findEntry(nodes, requestedId, namespace);
    if (hit) return { claimId: hit.entry.id, publicId: publicSandboxId(hit.entry.id), address: hit.node.address, nodeName: hit.node.name };
    const probed = await firstHit(
      nodes.filter((n) => n.address),
      FANOUT_CONCURRENCY,
      async (node, signal) => {
        const row = await this.client(node.address).get(claimId, { signal, timeoutMs: PROBE_TIMEOUT_MS });
        if (namespaceOfName(row.claim_ref || row.id) !== namespace) return undefined;
        return { node, row };
      },
    );
    if (!probed) throw sandboxNotFound(requestedId);
    this.remember(namespace, claimId, probed.node.address, probed.node.name);
    return { claimId, publicId, address: probed.node.address, nodeName: probed.node.name, row: probed.row };
  }
}
