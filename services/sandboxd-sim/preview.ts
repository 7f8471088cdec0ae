// sandboxd-sim — development substrate standing in for sandboxd (which needs KVM). Not product code.
//
// Preview URLs (sandboxd.md §5.6): `POST /v1/sandboxes/{id}/preview` mints `http://<preview_advertise>/p/<token>/`,
// a browser URL for one guest port. The token is self-contained and signed, as on the node: it names the sandbox,
// the port, the owner's advertise address and the expiry, so any node's preview listener could serve it and a
// released sandbox's URL stops resolving with no revocation list. The simulator mints and verifies tokens; it does
// not run a preview listener (nothing serves the URL), so the advertise default is a reserved `.invalid` name.
//
// Lifetime: `ttl_seconds` ≤ 0 asks for one hour (the node's default for an unleased claim); the result is clamped
// to the claim's deadline. An archived-forever claim has no deadline, so its requested lifetime stands.
import { createHmac } from "node:crypto";
import { SandboxdClient } from "#shared/sandboxd/index.ts";
import { safeEqual } from "./auth.ts";
import type { Claim } from "./claims.ts";

export const DEFAULT_PREVIEW_TTL_SECONDS = 3600;
/** Where minted URLs point when no address is configured: RFC 2606 `.invalid` never resolves (nothing serves it). */
export const DEFAULT_PREVIEW_ADVERTISE = "preview.sandboxd-sim.invalid";

export interface PreviewGrant {
  sandboxId: string;
  port: number;
  owner: string;
  /** Expiry, ms since the epoch (whole seconds). */
  expiresAt: number;
}

const b64url = (b: Buffer | string) => Buffer.from(b).toString("base64url");

function sign(secret: string, payload: string): string {
  return b64url(createHmac("sha256", secret).update(payload).digest());
}

/** The grant's expiry: now + ttl (≤ 0 → one hour), clamped to the claim's lease when it has one. */
export function previewExpiry(now: number, claim: Pick<Claim, "deadline">, ttlSeconds: number | undefined): number {
  const ttl = ttlSeconds !== undefined && ttlSeconds > 0 ? ttlSeconds : DEFAULT_PREVIEW_TTL_SECONDS;
  const wanted = now + ttl * 1000;
  const clamped = claim.deadline === null ? wanted : Math.min(wanted, claim.deadline);
  return Math.floor(clamped / 1000) * 1000;
}

export function mintPreviewUrl(secret: string, advertise: string, g: PreviewGrant): string {
  const payload = b64url(JSON.stringify({ sb: g.sandboxId, port: g.port, owner: g.owner, exp: g.expiresAt / 1000 }));
  return `${SandboxdClient.baseUrlFor(advertise)}/p/${payload}.${sign(secret, payload)}/`;
}

/** The grant inside a URL this node (same secret) minted, or null for a foreign, tampered or malformed one. */
export function readPreviewUrl(secret: string, url: string): PreviewGrant | null {
  const m = /\/p\/([A-Za-z0-9_-]+)\.([A-Za-z0-9_-]+)\/?$/.exec(new URL(url).pathname);
  if (!m || !safeEqual(m[2]!, sign(secret, m[1]!))) return null;
  try {
    const v = JSON.parse(Buffer.from(m[1]!, "base64url").toString("utf8")) as { sb: string; port: number; owner: string; exp: number };
    return { sandboxId: v.sb, port: v.port, owner: v.owner, expiresAt: v.exp * 1000 };
  } catch {
    return null;
  }
}
