// The claim metadata keys the surface stamps for itself (idempotency.ts), kept out of what clients set and see. A leaf
// module (imports nothing): create.ts and render.ts read it at load time.

/** Claim metadata keys under this prefix are the surface's own: a client may not set them, nor sees them. */
export const SURFACE_METADATA_PREFIX = "e2b-surface.";

/** The metadata a client sees: the surface's own stamps left out. */
export function clientMetadata(m: Record<string, string> | undefined): Record<string, string> | undefined {
  if (!m) return m;
  const keys = Object.keys(m);
  if (!keys.some((k) => k.startsWith(SURFACE_METADATA_PREFIX))) return m;
  return Object.fromEntries(keys.filter((k) => !k.startsWith(SURFACE_METADATA_PREFIX)).map((k) => [k, m[k]!]));
}
