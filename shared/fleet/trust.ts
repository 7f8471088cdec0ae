// Which NodeInventory objects the fleet may call (issue 22 case 2): every reader sends the fleet's sandboxd root
// token to an inventory's `address`, so an inventory counts only when it names a Node the cluster knows, under that
// Node's own name, and its address host is one of that Node's status.addresses (or lies in a network the operator
// trusts through --inventory-trusted-networks). Pure: the Node comes from the caller's lister.
import { BlockList, isIP } from "node:net";
import { addressHost, cidrProblem } from "../config/index.ts";
import type { NodeInventory } from "../inventory/index.ts";

export { addressHost };

/** The part of a Node this check reads. */
export interface NodeAddresses {
  metadata?: { name?: string };
  status?: { addresses?: { type?: string; address?: string }[] };
}

export type TrustVerdict = { trusted: true } | { trusted: false; reason: string };

/** Networks whose addresses are trusted for any known Node (--inventory-trusted-networks). */
export class TrustedNetworks {
  private readonly list = new BlockList();
  readonly cidrs: readonly string[];

  /** Throws with the offending entry when one is not `ip/prefix`. */
  constructor(cidrs: readonly string[]) {
    this.cidrs = cidrs.map((c) => c.trim()).filter(Boolean);
    for (const c of this.cidrs) {
      const problem = cidrProblem(c);
      if (problem) throw new Error(`trusted network "${c}": ${problem}`);
      const [ip, prefix] = c.split("/") as [string, string];
      this.list.addSubnet(ip, Number(prefix), isIP(ip) === 6 ? "ipv6" : "ipv4");
    }
  }

  has(host: string): boolean {
    const family = isIP(host);
    return family !== 0 && this.list.check(host, family === 6 ? "ipv6" : "ipv4");
  }
}

/**
 * The verdict on one inventory: its object name must be the node it describes, that Node must exist, and the
 * address host (when there is an address) must be one of the Node's addresses or in a trusted network.
 */
export function inventoryTrust(
  inv: Pick<NodeInventory, "metadata" | "node" | "address">,
  node: NodeAddresses | undefined,
  networks: TrustedNetworks,
): TrustVerdict {
  if (inv.metadata.name !== inv.node) return { trusted: false, reason: `object name "${inv.metadata.name}" is not its node "${inv.node}"` };
  if (!node) return { trusted: false, reason: `no Node "${inv.node}" in the cluster` };
  // No address: no reader calls it (every call site skips an empty address), so its Node is vouch enough.
  if (!inv.address) return { trusted: true };
  const host = addressHost(inv.address);
  if (!host) return { trusted: false, reason: "no address host" };
  const known = (node.status?.addresses ?? []).some((a) => (a.address ?? "").toLowerCase() === host);
  if (known || networks.has(host)) return { trusted: true };
  return { trusted: false, reason: `address host ${host} is none of Node "${inv.node}"'s addresses and in no trusted network` };
}
