// Which sandboxes the fleet view shows asleep (issue 28 item 5; docs/envd-relay.md "The first request after
// sleep"): phase Hibernated, i.e. paused, or put to sleep by its node when idle (services/sandboxd-sim/docs/sleep.md),
// or archived. A relay to one of them with the sandbox's token is the request that wakes it: the node holds the
// Upgrade until the sandbox runs (one wake per sandbox however many relays wait on it). The proxy only needs to
// know, to time that wait and to say so when the wake fails.
// Node records are immutable per publish, so each one's asleep set is built once (WeakMap) and a relay asks in
// O(nodes) with no scan of their entries.
import type { FleetNode } from "../fleet/index.ts";

const asleepByNode = new WeakMap<FleetNode, ReadonlySet<string>>();

function asleepOn(node: FleetNode): ReadonlySet<string> {
  let set = asleepByNode.get(node);
  if (!set) {
    set = new Set(node.entries.filter((e) => e.phase === "Hibernated").map((e) => e.id));
    asleepByNode.set(node, set);
  }
  return set;
}

/** Whether the view's node at `address` lists claim `claimId` asleep (false when the view has no word on it). */
export function asleepInView(nodes: readonly FleetNode[], address: string, claimId: string): boolean {
  for (const node of nodes) if (node.address === address) return asleepOn(node).has(claimId);
  return false;
}
