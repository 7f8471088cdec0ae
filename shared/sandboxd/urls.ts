// Data-plane URLs (§5.6) that need no call: the node's relay endpoints and the e2b SDK's signed envd file
// URLs. The preview URL is minted by the node (`POST …/preview`, verbs.ts): its signed token is the node's, so
// it cannot be built here.
import { createHash } from "node:crypto";
import { enc } from "./call.ts";

/** `GET /v1/sandboxes/{id}/ports/{port}` on a node (dial it with `Upgrade: tcp`). */
export function portRelayUrl(baseUrl: string, id: string, port: number): string {
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new RangeError(`port must be 1-65535, got ${port}`);
  return `${baseUrl}/v1/sandboxes/${enc(id)}/ports/${port}`;
}

/** `GET /v1/sandboxes/{id}/agent` on a node (dial it with `Upgrade: silkd`). */
export function agentUrl(baseUrl: string, id: string): string {
  return `${baseUrl}/v1/sandboxes/${enc(id)}/agent`;
}

export interface FileSignatureInput {
  path: string;
  operation: "read" | "write";
  user: string;
  accessToken: string;
  expiresAtSeconds?: number;
}

/**
 * The e2b SDK's signed envd file URL signature (envd-proxy.md §9): `"v1_" + base64(sha256(
 * "<path>:<read|write>:<user>:<accessToken>[:<expiry>]"))` without `=` padding. envd verifies it; the relay only
 * recognises the query and opens the node's port relay with the root token (passive).
 */
export function fileSignature(o: FileSignatureInput): string {
  const raw = `${o.path}:${o.operation}:${o.user}:${o.accessToken}${o.expiresAtSeconds === undefined ? "" : `:${o.expiresAtSeconds}`}`;
  return `v1_${createHash("sha256").update(raw).digest("base64").replace(/=+$/, "")}`;
}

/** `<envdBase>/files?path=…&username=…&signature=…[&signature_expiration=…]`, as the SDK's download/upload URL. */
export function signedFileUrl(envdBase: string, o: FileSignatureInput): string {
  const q = new URLSearchParams({ path: o.path, username: o.user, signature: fileSignature(o) });
  if (o.expiresAtSeconds !== undefined) q.set("signature_expiration", String(o.expiresAtSeconds));
  return `${envdBase.replace(/\/+$/, "")}/files?${q.toString()}`;
}
