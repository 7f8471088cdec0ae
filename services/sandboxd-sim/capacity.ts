// sandboxd-sim — development substrate standing in for sandboxd (which needs KVM). Not product code.
//
// Node and tenant `max_claims` (0 = unlimited) and the drain cordon, with sandboxd's exact 429 texts. A batch
// (fork) must fit entirely: `want` is the number of claims about to be created. Lowering a cap evicts nothing.
import { SimError } from "./errors.ts";
import type { ClaimTable } from "./claims.ts";
import type { TokenSet } from "./auth.ts";

export interface CapacityState {
  maxClaims: number;
  draining: boolean;
}

/** The reason a new claim would be refused, or null. Checked before provisioning and again at finalize. */
export function capacityProblem(
  state: CapacityState,
  tokens: TokenSet,
  table: ClaimTable,
  tenant: string | undefined,
  want = 1,
): string | null {
  if (state.draining) return "node claim quota reached: node draining";
  const live = table.size;
  if (state.maxClaims > 0 && live + want > state.maxClaims) {
    return `node claim quota reached: ${live} live claims, cap ${state.maxClaims}`;
  }
  if (tenant !== undefined) {
    const cap = tokens.tenants.get(tenant)?.max_claims ?? 0;
    if (cap > 0) {
      const mine = table.count((c) => c.tenant === tenant);
      if (mine + want > cap) return `node claim quota reached: tenant ${tenant} at ${mine} live claims, cap ${cap}`;
    }
  }
  return null;
}

export function checkCapacity(state: CapacityState, tokens: TokenSet, table: ClaimTable, tenant: string | undefined, want = 1): void {
  const p = capacityProblem(state, tokens, table, tenant, want);
  if (p) throw new SimError(429, p);
}
