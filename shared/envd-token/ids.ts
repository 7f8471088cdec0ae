// Sandbox id forms of the e2b surface (docs/e2b.md "Ids"). sandboxd names a claim `sb_<hex>`; e2b clients see a
// DNS-label-safe rendering (`sb-<hex>`) because the id becomes part of a host name. Requests accept either spelling.

/** Claim id -> public id: lowercased, every character outside [a-z0-9-] replaced by `-`. Safe ids are unchanged. */
export function publicSandboxId(claimId: string): string {
  return claimId.toLowerCase().replace(/[^a-z0-9-]/g, "-");
}

/**
 * Either spelling -> the claim id sandboxd knows. A public `sb-…` maps back to `sb_…` (sandboxd ids carry exactly
 * one underscore, after `sb`); any other text is passed through unchanged and simply fails to match.
 */
export function claimIdOf(id: string): string {
  const t = id.trim();
  return /^sb-[0-9a-f]+$/i.test(t) ? `sb_${t.slice(3).toLowerCase()}` : t;
}

/** Whether a requested id (either spelling) names this claim: equal to the raw id, or to its public rendering. */
export function sameSandboxId(requested: string, claimId: string): boolean {
  const r = requested.trim();
  return r === claimId || r.toLowerCase() === publicSandboxId(claimId);
}
