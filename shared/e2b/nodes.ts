// Finding and calling the node that holds a sandbox (docs/e2b.md "Owner lookup"). Order, first hit wins:
//   1. the node remembered for (namespace, claim id) since this process claimed it;
//   2. the fleet snapshot's entries (fresh nodes only) of the caller's namespace;
//   3. a live `GET /v1/sandboxes/{claimId}` on every fresh node (≤16 at once, the rest cancelled on the first hit),
//      accepted only when the row's claim_ref puts it in the caller's namespace.
// A miss is 404 `sandbox "<id>" not found`, the same answer as "exists in another namespace". A claim belongs to a
// namespace only when its claim_ref starts with `<ns>/`: a claim with no prefix (made outside the e2b surface) is
// reachable by no key, although the fleet files it under `default`. A claim that backs a Kubernetes Pod (vk-sandbox's
// `vk-sandbox.pod-uid` stamp, on the fleet entry or the live row) belongs to no key either, whatever its claim_ref:
// the e2b surface has no Kubernetes identity to check the Pod's RBAC with (docs/e2b.md "Pod-backed sandboxes").
import { type Clock, realClock } from "../clock/index.ts";
import type { Logger } from "../log/index.ts";
import type { FleetNode, FleetSource } from "../fleet/index.ts";
import { FANOUT_CONCURRENCY, firstHit, mapLimit } from "../fleet/index.ts";
import type { EntryHit, FleetEntry } from "../fleet/index.ts";
import { findEntry, isPodBacked, nodeByAddress } from "../fleet/index.ts";
import { SandboxdClient } from "../sandboxd/index.ts";
import type { SandboxDetail } from "../sandboxd/index.ts";
import { sandboxNotFound } from "./errors.ts";
import { claimIdOf, publicSandboxId } from "./ids.ts";
import { TemplateWrites, goneAfterDelete, type TemplateHolder } from "./template-writes.ts";

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

/**
 * How long a claim of this process counts toward its namespace's quota while the fleet view does not list it yet,
 * and how long a released one is left out while the view still lists it: a poll tick or an inventory publish.
 */
export const LISTING_LAG_MS = 60_000;

/** Whether a claim_ref (or a fleet entry's name) is `<namespace>/…`: the only way a claim belongs to a key. */
export function inNamespace(claimRef: string | undefined, namespace: string): boolean {
  return namespace !== "" && claimRef !== undefined && claimRef.startsWith(`${namespace}/`);
}

/** Whether a fleet entry is a key's of `namespace`: under its `<ns>/` prefix and not a Pod's microVM. */
const belongs = (entry: FleetEntry, namespace: string) => inNamespace(entry.name, namespace) && !isPodBacked(entry.metadata);

/** Every fleet entry a key of the namespace owns (by its `<ns>/` prefix, never the `default` fallback; no Pod's VM). */
export function entriesIn(nodes: readonly FleetNode[], namespace: string): EntryHit[] {
  const out: EntryHit[] = [];
  for (const node of nodes) for (const entry of node.entries) if (belongs(entry, namespace)) out.push({ node, entry });
  return out;
}

/** Whether a live sandboxd row is a key's of `namespace` (the probe's and the live read's test). */
export function rowBelongs(row: Pick<SandboxDetail, "claim_ref" | "metadata">, namespace: string): boolean {
  return inNamespace(row.claim_ref, namespace) && !isPodBacked(row.metadata);
}

export class NodeAccess {
  private readonly clients = new Map<string, SandboxdClient>();
  private readonly remembered = new Map<string, Remembered>();
  private pruneAt = 1000;
  /** namespace -> claim id -> when this process claimed it (quota counting until the view lists it). */
  private readonly recent = new Map<string, Map<string, number>>();
  /** claim id -> when this process released it (left out of quota counts while the view still lists it). */
  private readonly released = new Map<string, number>();
  private releasedPruneAt = 1000;
  /** This replica's recent promotes and template deletes, laid over the snapshot until it shows them. */
  readonly templateWrites: TemplateWrites;

  constructor(
    readonly fleet: FleetSource,
    private readonly rootToken: string,
    private readonly log: Logger,
    private readonly clock: Clock = realClock,
  ) {
    this.templateWrites = new TemplateWrites(clock);
  }

  nodes(): readonly FleetNode[] {
    return this.templateWrites.overlay(this.fleet.nodes());
  }

  /**
   * Delete template holders on their nodes (FANOUT_CONCURRENCY at once, never redirected); `byDigest`: only the
   * digest each holder names. The ones gone (deleted, or already absent) are gone for this replica's next read
   * (template-writes.ts); one whose delete failed still exists and stays listed. Results in holder order.
   */
  async deleteTemplates(holders: readonly TemplateHolder[], o: { byDigest: boolean; signal?: AbortSignal }): Promise<unknown[]> {
    const results = await mapLimit(holders, FANOUT_CONCURRENCY, ({ address, template: t }) =>
      this.client(address).deleteTemplate(
        { template: t.template, net: t.net, size: t.size },
        { noRedirect: true, ...(o.byDigest && t.contentDigest ? { digest: t.contentDigest } : {}), ...(o.signal ? { signal: o.signal } : {}) },
      ),
    );
    this.templateWrites.deleted(holders.filter((_, i) => goneAfterDelete(results[i])));
    return results;
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
    let mine = this.recent.get(namespace);
    if (!mine) this.recent.set(namespace, (mine = new Map()));
    mine.set(claimId, now);
  }

  forget(namespace: string, claimId: string): void {
    this.remembered.delete(`${namespace}\0${claimId}`);
    this.recent.get(namespace)?.delete(claimId);
  }

  /** A sandbox this process released: out of the quota count at once, although the view lists it a while longer. */
  markReleased(claimId: string): void {
    const now = this.clock.now();
    // Pruned as `remember` prunes: at most once per thousand releases' worth of growth (O(1) amortised; a scan per
    // release once a minute held 1000 kills was most of a kill's own CPU).
    if (this.released.size >= this.releasedPruneAt) {
      for (const [k, at] of this.released) if (at + LISTING_LAG_MS <= now) this.released.delete(k);
      this.releasedPruneAt = this.released.size + 1000;
    }
    this.released.set(claimId, now);
  }

  /** Sandboxes the namespace holds as this process sees them: listed by the view, or claimed here and not yet listed. */
  liveCount(namespace: string): number {
    const now = this.clock.now();
    const ids = new Set<string>();
    for (const { entry } of entriesIn(this.nodes(), namespace)) ids.add(entry.id);
    const mine = this.recent.get(namespace);
    if (mine) {
      for (const [id, at] of mine) {
        if (at + LISTING_LAG_MS <= now) mine.delete(id);
        else ids.add(id);
      }
    }
    // Look up the counted ids in `released` rather than walk it (it holds up to a minute of this process's kills).
    for (const id of ids) {
      const at = this.released.get(id);
      if (at === undefined) continue;
      if (at + LISTING_LAG_MS <= now) this.released.delete(id);
      else ids.delete(id);
    }
    return ids.size;
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
    const hit = findEntry(nodes, requestedId);
    // Listed, but not under `<ns>/` (another tenant's, or a claim made outside the surface): no probe can change that.
    if (hit && !belongs(hit.entry, namespace)) throw sandboxNotFound(requestedId);
    if (hit) return { claimId: hit.entry.id, publicId: publicSandboxId(hit.entry.id), address: hit.node.address, nodeName: hit.node.name };
    const probed = await firstHit(
      nodes.filter((n) => n.address),
      FANOUT_CONCURRENCY,
      async (node, signal) => {
        const row = await this.client(node.address).get(claimId, { signal, timeoutMs: PROBE_TIMEOUT_MS });
        if (!rowBelongs(row, namespace)) return undefined;
        return { node, row };
      },
    );
    if (!probed) throw sandboxNotFound(requestedId);
    this.remember(namespace, claimId, probed.node.address, probed.node.name);
    return { claimId, publicId, address: probed.node.address, nodeName: probed.node.name, row: probed.row };
  }
}
