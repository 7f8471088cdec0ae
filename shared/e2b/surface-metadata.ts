// The claim metadata keys the surface stamps for itself (idempotency.ts), kept out of what clients set and see. A leaf
// module (it imports only shared/envd-token, which imports nothing of shared/e2b): create.ts and render.ts read it at
// load time.
import { PUBLIC_TRAFFIC_METADATA_KEY } from "../envd-token/index.ts";

/** Claim metadata keys under this prefix are the surface's own: a client may not set them, nor sees them. */
export const SURFACE_METADATA_PREFIX = "e2b-surface.";

/** A stamp no client sets or sees: the surface's own, or the public-ports choice (shared/envd-token/traffic.ts). */
function isStamp(key: string): boolean {
  return key.startsWith(SURFACE_METADATA_PREFIX) || key === PUBLIC_TRAFFIC_METADATA_KEY;
}

/** The metadata a client sees: the stamps left out. */
export function clientMetadata(m: Record<string, string> | undefined): Record<string, string> | undefined {
  if (!m) return m;
  const keys = Object.keys(m);
  if (!keys.some(isStamp)) return m;
  return Object.fromEntries(keys.filter((k) => !isStamp(k)).map((k) => [k, m[k]!]));
}
