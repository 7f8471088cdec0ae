// Placement of a claim on the fleet (docs/e2b.md "Create"): two random choices among the nodes whose pool of the key
// shows warm VMs, the warmer wins; undelivered outcomes re-sample; other errors end the create as claimFailure says.
import type { Logger } from "../log/index.ts";
import { claimCandidates, nodeByAddress } from "../fleet/index.ts";
import { SandboxdClient, isSandboxdError, provablyUndelivered, type ClaimReply, type ClaimRequest, type PoolKey } from "../sandboxd/index.ts";
import { E2bError } from "./errors.ts";
import type { NodeAccess } from "./nodes.ts";

/** The node access placement needs: the fleet snapshot, a client per node, and the fleet's refresh hint. */
export type PlacementNodes = Pick<NodeAccess, "nodes" | "client" | "fleet">;

/**
 * Claim on the fleet: candidates are fresh nodes whose pool of the key has warm VMs in the snapshot; sample two,
 * take the warmer. Undelivered outcomes drop the node and re-sample; other errors end the create. Undefined = no
 * node delivered.
 *
 * When the snapshot shows no warm VM anywhere, nodes whose pool for the key has a warm TARGET are asked anyway
 * (docs/e2b.md "Create"): the snapshot lags refills by up to a poll tick or an inventory publish, and a burst that
 * drained the pool for a moment would otherwise answer 503 for that whole lag. A pool configured with no warm VMs
 * (target 0) is never asked, so an unpooled image still answers 503 rather than cold-booting.
 */
export async function placeClaim(access: PlacementNodes, log: Logger, key: PoolKey, req: ClaimRequest): Promise<{ reply: ClaimReply; calledAddress: string } | undefined> {
  const nodes = access.nodes();
  let cands = claimCandidates(nodes, key);
  if (cands.length === 0) {
    cands = nodes
      .filter((n) => n.address && n.pools.some((p) => p.template === key.template && p.net === key.net && p.size === key.size && p.target > 0))
      .map((node) => ({ node, warm: 0 }));
    for (const c of cands) access.fleet.changed?.(c.node.address);
  }
  const resolveTarget = (addr: string): SandboxdClient | undefined => {
    const n = nodeByAddress(access.nodes(), addr);
    return n ? access.client(n.address) : undefined;
  };
  while (cands.length > 0) {
    const i = Math.floor(Math.random() * cands.length);
    let pick = i;
    if (cands.length > 1) {
      let j = Math.floor(Math.random() * (cands.length - 1));
      if (j >= i) j++;
      pick = cands[j]!.warm > cands[i]!.warm ? j : i;
    }
    const node = cands[pick]!.node;
    try {
      return { reply: await access.client(node.address).claim(req, { resolveTarget }), calledAddress: node.address };
    } catch (err) {
      if (provablyUndelivered(err)) {
        log.debug({ node: node.name, err }, "claim not delivered; trying another node");
        cands = cands.filter((_, k) => k !== pick);
        continue;
      }
      throw claimFailure(err);
    }
  }
  return undefined;
}

/** A claim that was delivered but failed: the node's 400/409 keep their status (generic words; its text is the logged detail); anything else is a fixed 500. */
export function claimFailure(err: unknown): E2bError {
  if (isSandboxdError(err) && (err.status === 400 || err.status === 409)) {
    return new E2bError(err.status, err.status === 400 ? "the node refused the claim as invalid" : "the node refused the claim: the template or snapshot is not claimable now", undefined, err.serverMessage);
  }
  return new E2bError(500, "failed to claim a sandbox", undefined, isSandboxdError(err) ? err.serverMessage || err.message : undefined).withCode("sandbox_create_failed");
}
