// sandboxd-sim — development substrate standing in for sandboxd (which needs KVM). Not product code.
//
// Several simulated nodes in one process. Real sandboxd nodes learn each other's warm counts, promoted templates
// and checkpoints by gossip; here a node simply looks its peers up in a shared registry by advertise address.
// A peer address that is not registered (an unknown target) is skipped, as a stale gossip entry would be.
//
// Claim redirects (only when the request did not set no_redirect, and only with peers):
//   1. a forced redirect (the forceRedirect knob) wins;
//   2. the key is a template promoted on a peer but not held here (no golden here) -> that owner, with
//      require_promoted:true;
//   3. a warm miss here, or this node refuses (max_claims / tenant cap / draining), with warm peers -> ≤2 of them,
//      picked by power-of-two choice and ordered by warm count.
import { poolKeyString, type PoolKey, type RedirectReply } from "#shared/sandboxd/index.ts";
import type { SimNode } from "./node.ts";

export class Mesh {
  private readonly nodes = new Map<string, SimNode>();
  register(n: SimNode): void {
    this.nodes.set(n.addr, n);
  }
  unregister(n: SimNode): void {
    if (this.nodes.get(n.addr) === n) this.nodes.delete(n.addr);
  }
  get(addr: string): SimNode | undefined {
    return this.nodes.get(addr);
  }
}

function peerNodes(node: SimNode): SimNode[] {
  const out: SimNode[] = [];
  for (const a of node.peerAddrs) {
    const p = node.mesh.get(a);
    if (p && p !== node && p.listening) out.push(p);
  }
  return out;
}

export function claimRedirect(node: SimNode, key: PoolKey, o: { requirePromoted: boolean; refused: boolean }): RedirectReply | null {
  if (node.forced) {
    const r: RedirectReply = { redirect: [...node.forced.targets] };
    if (node.forced.requirePromoted || o.requirePromoted) r.require_promoted = true;
    return r;
  }
  const peers = peerNodes(node);
  if (peers.length === 0) return null;
  const k = poolKeyString(key);
  const promotedHere = node.templates.has(k);
  const goldenHere = node.pools.get(key)?.golden ?? false;
  if (!promotedHere && (o.requirePromoted || !goldenHere)) {
    const owners = peers.filter((p) => p.templates.has(k));
    if (owners.length > 0) return { redirect: owners.slice(0, 2).map((p) => p.addr), require_promoted: true };
  }
  if (o.requirePromoted) return null;
  const warmHere = promotedHere || node.pools.warmCount(key) > 0;
  if (warmHere && !o.refused) return null;
  const warm = peers.filter((p) => p.pools.warmCount(key) > 0);
  if (warm.length === 0) return null;
  return { redirect: powerOfTwo(node, warm, key).map((p) => p.addr) };
}

/** Two random candidates (all of them when ≤2), the warmer first. */
function powerOfTwo(node: SimNode, cands: SimNode[], key: PoolKey): SimNode[] {
  let pick = cands;
  if (cands.length > 2) {
    const i = Math.floor(node.ids.random() * cands.length);
    let j = Math.floor(node.ids.random() * (cands.length - 1));
    if (j >= i) j++;
    pick = [cands[i]!, cands[j]!];
  }
  return [...pick].sort((a, b) => b.pools.warmCount(key) - a.pools.warmCount(key));
}

/** Checkpoint claims redirect to ≤3 peers holding the checkpoint. */
export function checkpointOwners(node: SimNode, id: string): string[] {
  return peerNodes(node)
    .filter((p) => p.checkpoints.has(id))
    .slice(0, 3)
    .map((p) => p.addr);
}

/** Template deletes redirect to the peers holding the promoted template. */
export function templateOwners(node: SimNode, key: PoolKey): string[] {
  const k = poolKeyString(key);
  return peerNodes(node)
    .filter((p) => p.templates.has(k))
    .map((p) => p.addr);
}
