// The live read most sandbox endpoints start with: locate the owner (nodes.ts), then read the row there with the
// root token unless the lookup's own probe already did. The live row is the last word on namespace and state.
import { isSandboxdError, parseWireTime, type SandboxDetail } from "../sandboxd/index.ts";
import { fromNode, sandboxNotFound } from "./errors.ts";
import { rowBelongs, type Located, type NodeAccess } from "./nodes.ts";

export type LookupNodes = Pick<NodeAccess, "locate" | "client" | "forget">;

export class LiveLookup {
  /**
   * `gone` hears of each sandbox its owner node answered 404 for: the surface then answers it as killed here, so a
   * fleet view still listing it (a listing taken before the reap, applied after) cannot bring it back for a while.
   */
  constructor(
    private readonly nodes: LookupNodes,
    private readonly gone: (ns: string, claimId: string) => void = () => undefined,
  ) {}

  /** Locate, then read the row live (root): a 404 anywhere is `sandbox "<id>" not found`; other failures `fixed`. */
  async read(ns: string, id: string, fixed: string): Promise<{ loc: Located; row: SandboxDetail }> {
    const loc = await this.nodes.locate(ns, id);
    if (loc.row) return { loc, row: loc.row };
    let row: SandboxDetail;
    try {
      row = await this.nodes.client(loc.address).get(loc.claimId);
    } catch (err) {
      if (isSandboxdError(err) && err.status === 404) {
        this.nodes.forget(ns, loc.claimId);
        this.gone(ns, loc.claimId);
      }
      throw fromNode(err, id, fixed);
    }
    // A Pod's microVM (stamped after the view last saw it) is not found here.
    if (!rowBelongs(row, ns)) {
      this.nodes.forget(ns, loc.claimId);
      throw sandboxNotFound(id);
    }
    return { loc, row };
  }
}

/** The row's claim time in epoch ms (which token form its envd holds depends on it), undefined when unknown. */
export function claimedAtOf(row: SandboxDetail): number | undefined {
  const t = row.claimed_at ? parseWireTime(row.claimed_at) : null;
  return t ?? undefined;
}
