// Metadata, labels and env maps (§3.1), re-exported by schemas.ts. Metadata: ≤16 pairs; key 1–128 B
// printable ASCII without `=`/`&`; value ≤512 B printable UTF-8; ≤4 KiB as JSON. Template labels follow the same
// rules. The node validates these; the simulator decodes claim bodies through them.
import { z } from "zod";

// The keys vk-sandbox stamps on every claim it makes for a Pod (services/vk-sandbox/provider/claim-metadata.ts):
// the aggregated apiserver reads the Pod UID stamp to tell a Pod-backed sandbox (sandboxes/pod-guard.ts).
export const NODE_METADATA_KEY = "vk-sandbox.node";
export const POD_UID_METADATA_KEY = "vk-sandbox.pod-uid";
export const AUTHORITY_METADATA_KEY = "vk-sandbox.authority";

const METADATA_KEY_RE = /^[\x21-\x7e]{1,128}$/;
const PRINTABLE_UTF8_RE = /^[^\p{Cc}]*$/u;

/** The reason a metadata map breaks the node's rules, or null when it is acceptable. */
export function metadataProblem(m: Record<string, string>): string | null {
  const entries = Object.entries(m);
  if (entries.length > 16) return "metadata: more than 16 pairs";
  for (const [k, v] of entries) {
    if (!METADATA_KEY_RE.test(k) || k.includes("=") || k.includes("&")) return `metadata: invalid key ${JSON.stringify(k)}`;
    if (Buffer.byteLength(v, "utf8") > 512) return `metadata: value of ${JSON.stringify(k)} exceeds 512 bytes`;
    if (!PRINTABLE_UTF8_RE.test(v)) return `metadata: value of ${JSON.stringify(k)} is not printable`;
  }
  if (Buffer.byteLength(JSON.stringify(m), "utf8") > 4096) return "metadata: exceeds 4 KiB";
  return null;
}

export const Metadata = z.record(z.string(), z.string()).superRefine((m, ctx) => {
  const p = metadataProblem(m);
  if (p) ctx.addIssue({ code: "custom", message: p });
});
export type Metadata = z.infer<typeof Metadata>;

export const EnvEntry = z.object({
  value: z.string(),
  guest: z.boolean().optional(),
  inject: z.boolean().optional(),
});
export const EnvMap = z.record(z.string(), EnvEntry).superRefine((m, ctx) => {
  if (Object.keys(m).length > 64) ctx.addIssue({ code: "custom", message: "env: more than 64 entries" });
  if (Buffer.byteLength(JSON.stringify(m), "utf8") > 64 * 1024) ctx.addIssue({ code: "custom", message: "env: exceeds 64 KiB" });
});
