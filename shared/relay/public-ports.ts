// Which credential a relayed request carries, and whether a sandbox's user port admits a request that carries
// none (docs/envd-relay.md "Public ports", shared/envd-token/traffic.ts): envd's port 49983 always needs its access
// token (or a signed file URL); a user port takes the envd access token, the `e2b-traffic-access-token` header, or
// nothing at all when the sandbox's ports are public. Pure functions: the proxy resolves the owner and judges.
import { E2B_CLOUD_PUBLIC_TRAFFIC, ENVD_PORT, TRAFFIC_TOKEN_HEADER, type PublicTrafficPolicy } from "../envd-token/index.ts";
import type { Owner } from "./owners.ts";
import { isSignedFileUrl } from "./route.ts";

/** What the request presents. `none` on envd's port is refused before any lookup; on a user port it may be public. */
export type Credential =
  | { kind: "envd-token"; token: string }
  | { kind: "traffic-token"; token: string }
  | { kind: "signed-url" }
  | { kind: "none"; envdPort: boolean };

/** Traffic tokens are 64 hex digits (traffic.ts); anything else is refused before it costs a lookup. */
export const TRAFFIC_TOKEN_RE = /^[0-9a-f]{64}$/;

export function credentialOf(port: number, method: string, url: URL, headers: { get(name: string): string | null }): Credential {
  const envd = (headers.get("x-access-token") ?? "").trim();
  if (envd !== "") return { kind: "envd-token", token: envd };
  if (port !== ENVD_PORT) {
    const traffic = (headers.get(TRAFFIC_TOKEN_HEADER) ?? "").trim();
    if (traffic !== "") return { kind: "traffic-token", token: traffic };
    return { kind: "none", envdPort: false };
  }
  return isSignedFileUrl(port, method, url) ? { kind: "signed-url" } : { kind: "none", envdPort: true };
}

/**
 * Whether the owner's user ports are served with no token under `policy`: only when its claim carries the public
 * stamp `"true"` (docs/decisions.md "Unstamped claims are private"). A claim without the stamp (a Sandbox created
 * through the Kubernetes API, a claim made before the stamp existed, any claim no e2b create made) is private,
 * whatever `policy.defaultPublic` says: that default is what an e2b create that does not say gets stamped with.
 */
export function servesPublicly(owner: Pick<Owner, "publicTraffic">, policy: PublicTrafficPolicy = E2B_CLOUD_PUBLIC_TRAFFIC): boolean {
  return !policy.forbid && owner.publicTraffic === true;
}
