// The NodeInventory publisher (§9, --publish-inventory): immediately, then every --publish-interval, rebuild
// this node's inventory from live sandboxd state and server-side apply it as field manager `vk-sandbox`.
//
// Every failure is logged and skips one publish, never more: the next tick rebuilds from scratch. A failed listing
// is not an empty list, so nothing is applied when either sandboxd read fails (readers then see `publishedAt`
// stall and treat the node as stale, which is the truth). A Node seen once and then gone stops publishing: the
// inventory is owned by the Node, GC removes it, and re-applying would resurrect an orphan.
import type { V1Node } from "@kubernetes/client-node";
import type { KubeClient } from "#shared/kube/index.ts";
import { isNotFound } from "#shared/kube/index.ts";
import { Nodes } from "#shared/kube/index.ts";
import type { SandboxdClient } from "#shared/sandboxd/index.ts";
import { buildInventory } from "./build.ts";
import { NodeInventories, type NodeInventory } from "#shared/inventory/index.ts";
import { type Clock, realClock } from "#shared/clock/index.ts";
import { PeriodicLoop } from "#shared/lifecycle/index.ts";
import { errorMessage, type Log } from "#shared/log/index.ts";
import { addressHost } from "#shared/config/index.ts";

export type InventoryKubeClient = Pick<KubeClient, "get" | "patch">;
/** Declared apart so a test can fail the listing alone. */
export type InventorySandboxd = Pick<SandboxdClient, "list" | "info">;

export const FIELD_MANAGER = "vk-sandbox";

export interface InventoryPublisherOptions {
  kube: InventoryKubeClient;
  sandboxd: InventorySandboxd;
  nodeName: string;
  /** --sandboxd-advertise-addr (or its default). */
  address: string;
  /**
   * owner_addr of this provider's own claims, by sandbox id. Read once per publish: each listed row then looks its
   * id up instead of scanning the claims table (2000 rows against 2000 claims was 4 M comparisons per publish).
   */
  ownAddresses(): ReadonlyMap<string, string>;
  /** The node controller's signal that the Node was deleted while running. */
  nodeGone?: () => boolean;
  /** --publish-interval, positive (the flags reject anything else). */
  intervalMs: number;
  log: Log;
  clock?: Clock;
}

export type PublishOutcome =
  | { published: true; inventory: NodeInventory }
  | { published: false; reason: "node-gone" | "node-read-failed" | "sandboxd-failed" | "apply-failed"; error?: unknown };

export class InventoryPublisher {
  private readonly o: InventoryPublisherOptions;
  private readonly clock: Clock;
  private readonly loop: PeriodicLoop;
  private nodeSeen = false;
  private publishes = 0;
  /** The address host last warned about, so the warning is logged once per change, not every publish. */
  private warnedHost: string | undefined;

  constructor(opts: InventoryPublisherOptions) {
    if (!(opts.intervalMs > 0)) throw new RangeError(`publish interval must be positive, got ${opts.intervalMs} ms`);
    this.o = opts;
    this.clock = opts.clock ?? realClock;
    // publishOnce never throws, so the loop has nothing to log.
    this.loop = new PeriodicLoop({ name: "inventory", clock: this.clock, intervalMs: opts.intervalMs, first: "now", tick: async () => void (await this.publishOnce()) });
  }

  /** Successful applies since start. */
  get publishCount(): number {
    return this.publishes;
  }

  /** Publishes now, then every interval, until stopped. Idempotent. */
  start(): void {
    this.loop.start();
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }

  /** One publish; never throws. */
  async publishOnce(): Promise<PublishOutcome> {
    const name = this.o.nodeName;
    const log = this.o.log;
    if (this.o.nodeGone?.()) {
      log.debug({ node: name }, "node deleted while running; not publishing its inventory");
      return { published: false, reason: "node-gone" };
    }
    let nodeUid: string | undefined;
    try {
      // resourceVersion=0: served from the apiserver's watch cache; the UID never changes for one Node object.
      const node = await this.o.kube.get<V1Node>(Nodes, name, { resourceVersion: "0" });
      nodeUid = node.metadata?.uid;
      this.nodeSeen = true;
      this.warnIfUnvouched(node);
    } catch (e) {
      if (!isNotFound(e)) {
        log.warn({ node: name, err: errorMessage(e) }, "cannot read the Node; skipping this inventory publish");
        return { published: false, reason: "node-read-failed", error: e };
      }
      if (this.nodeSeen) {
        log.warn({ node: name }, "the Node was deleted; not publishing an inventory it would no longer own");
        return { published: false, reason: "node-gone", error: e };
      }
      // Never seen yet (registration still under way): publish without an owner; a later apply adds it.
    }
    let rows, info;
    try {
      [rows, info] = await Promise.all([this.o.sandboxd.list(), this.o.sandboxd.info()]);
    } catch (e) {
      log.warn({ node: name, err: errorMessage(e) }, "sandboxd listing or info failed; skipping this inventory publish");
      return { published: false, reason: "sandboxd-failed", error: e };
    }
    const own = this.o.ownAddresses();
    const inventory = buildInventory({
      nodeName: name,
      address: this.o.address,
      nodeUid,
      rows,
      info,
      ownAddressOf: (id) => own.get(id),
      publishedAt: new Date(this.clock.now()),
    });
    try {
      await this.o.kube.patch(NodeInventories, name, inventory, { type: "apply", fieldManager: FIELD_MANAGER, force: true });
    } catch (e) {
      log.warn({ node: name, err: errorMessage(e) }, "NodeInventory apply failed; the next tick retries");
      return { published: false, reason: "apply-failed", error: e };
    }
    this.publishes++;
    log.debug({ node: name, entries: inventory.entries?.length ?? 0, pools: inventory.pools?.length ?? 0 }, "published NodeInventory");
    return { published: true, inventory };
  }

  /**
   * The control plane calls this inventory only when its address host is one of the Node's addresses or in the
   * operator's --inventory-trusted-networks (shared/fleet/trust.ts). Say so here, where the operator looks first.
   */
  private warnIfUnvouched(node: V1Node): void {
    const host = addressHost(this.o.address);
    const addresses = (node.status?.addresses ?? []).map((a) => a.address.toLowerCase());
    if (host === undefined || addresses.includes(host) || this.warnedHost === host) return;
    this.warnedHost = host;
    this.o.log.warn(
      { node: this.o.nodeName, address: this.o.address, nodeAddresses: addresses },
      "the advertised sandboxd address is none of this Node's addresses: the control plane ignores this inventory " +
        "unless the address lies in its --inventory-trusted-networks (set --node-ip to the advertised host)",
    );
  }
}
