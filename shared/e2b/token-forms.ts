// Which form of the envd access token a sandbox's envd holds (docs/e2b.md "Access tokens"). Sandboxes made by this
// version hold the lane-tagged token; sandboxes made before tags hold the bare HMAC, and a `connect` must hand those
// back their own token or the SDK's envd calls fail. A sandbox claimed well after this process started was made by
// this version (or a replica of it); an older one is asked once (GET /envs with the tagged token: 401 = untagged),
// and the answer is memoised.
import type { Clock } from "../clock/index.ts";
import { INIT_TIMEOUT_MS, envdCall } from "./envd.ts";
import { deriveAccessToken, envdAccessToken } from "./tokens.ts";

/** A rolling upgrade's old replicas may still create untagged sandboxes this long after a new one starts. */
export const UPGRADE_WINDOW_MS = 10 * 60_000;
const MEMO_MAX = 4096;

export class TokenForms {
  private readonly untagged = new Map<string, boolean>();
  private readonly trustedAfter: number;

  constructor(
    private readonly envdSecret: string,
    private readonly rootToken: string,
    clock: Clock,
  ) {
    this.trustedAfter = clock.now() + UPGRADE_WINDOW_MS;
  }

  /** The token the sandbox's envd accepts. `claimedAtMs` undefined: unknown age, asked like an old one. */
  async accessTokenFor(address: string, claimId: string, claimToken: string, claimedAtMs: number | undefined): Promise<string> {
    const tagged = envdAccessToken(this.envdSecret, claimId, claimToken);
    if (claimedAtMs !== undefined && claimedAtMs > this.trustedAfter) return tagged;
    let old = this.untagged.get(claimId);
    if (old === undefined) {
      try {
        const r = await envdCall({ address, claimId, rootToken: this.rootToken }, { method: "GET", path: "/envs", headers: { "x-access-token": tagged }, timeoutMs: INIT_TIMEOUT_MS });
        old = r.status === 401;
      } catch {
        // envd unreachable: the current form is the best answer, and is not memoised.
        return tagged;
      }
      if (this.untagged.size >= MEMO_MAX) this.untagged.clear();
      this.untagged.set(claimId, old);
    }
    return old ? deriveAccessToken(this.envdSecret, claimToken) : tagged;
  }
}
