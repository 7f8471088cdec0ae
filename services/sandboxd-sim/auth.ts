// sandboxd-sim — development substrate standing in for sandboxd (which needs KVM). Not product code.
//
// The §2.2 decision procedure of sandboxd.md, verbatim. Three guards plus the body-token rule:
//   node-level     open node -> root; missing/unknown bearer -> 401 "invalid api token"; root or tenant scope
//   root-only      node-level, then a tenant scope -> 403 "operator token required"
//   sandbox-scoped missing bearer -> 401 "missing bearer token"; configured root (where elevation applies) ->
//                  operator; else the bearer must be the sandbox's own token; unknown id and mismatch are the
//                  same 404 "unknown sandbox" (owner says "not owned here")
// Every comparison is constant-time over SHA-256 digests, so neither content nor length leaks.
import { createHash, timingSafeEqual } from "node:crypto";
import { SimError, unknownSandbox } from "./errors.ts";

export interface TenantConfig {
  token: string;
  max_claims: number; // 0 = unlimited
}

export type Scope = { kind: "root" } | { kind: "tenant"; tenant: string };

export function safeEqual(a: string, b: string): boolean {
  const da = createHash("sha256").update(a).digest();
  const db = createHash("sha256").update(b).digest();
  return timingSafeEqual(da, db) && a.length === b.length;
}

/** The remainder after the exact prefix `Bearer `; empty counts as missing. */
export function bearerOf(authorization: string | null | undefined): string | undefined {
  if (!authorization || !authorization.startsWith("Bearer ")) return undefined;
  const t = authorization.slice("Bearer ".length);
  return t === "" ? undefined : t;
}

export class TokenSet {
  root: string | undefined;
  readonly tenants = new Map<string, TenantConfig>();

  constructor(root?: string, tenants: Record<string, TenantConfig> = {}) {
    this.set(root, tenants);
  }

  set(root: string | undefined | null, tenants: Record<string, TenantConfig> = {}): void {
    this.root = root || undefined;
    this.tenants.clear();
    for (const [name, t] of Object.entries(tenants)) this.tenants.set(name, { ...t });
  }

  /** No api_token and no tenants: every node-level and root-only surface is open and the caller is root. */
  get open(): boolean {
    return this.root === undefined && this.tenants.size === 0;
  }

  isRoot(bearer: string | undefined): boolean {
    return bearer !== undefined && this.root !== undefined && safeEqual(bearer, this.root);
  }

  tenantOf(bearer: string | undefined): string | undefined {
    if (bearer === undefined) return undefined;
    let found: string | undefined;
    // Walk every tenant so the time taken does not depend on which one matched.
    for (const [name, t] of this.tenants) if (safeEqual(bearer, t.token) && found === undefined) found = name;
    return found;
  }

  nodeLevel(bearer: string | undefined): Scope {
    if (this.open) return { kind: "root" };
    if (this.isRoot(bearer)) return { kind: "root" };
    const tenant = this.tenantOf(bearer);
    if (tenant !== undefined) return { kind: "tenant", tenant };
    throw new SimError(401, "invalid api token");
  }

  rootOnly(bearer: string | undefined): Scope {
    const scope = this.nodeLevel(bearer);
    if (scope.kind === "tenant") throw new SimError(403, "operator token required");
    return scope;
  }
}

export interface TokenHolder {
  token: string;
}

/**
 * Sandbox-scoped guard. `operator` says whether this verb accepts the configured root token (release, renew,
 * hibernate, wake, passive port relay); owner/agent/exec accept only the sandbox's own token. Returns whether the
 * caller came in as operator. An open node has no root token, so no elevation exists there.
 */
export function sandboxScoped<T extends TokenHolder>(
  tokens: TokenSet,
  bearer: string | undefined,
  sandbox: T | undefined,
  opts: { operator: boolean; notFound?: string },
): { sandbox: T; operator: boolean } {
  if (bearer === undefined) throw new SimError(401, "missing bearer token");
  // Built only on the failing path: an Error captures a stack, and this guard runs on every sandbox-scoped call.
  const notFound = () => (opts.notFound === undefined ? unknownSandbox() : new SimError(404, opts.notFound));
  if (opts.operator && tokens.isRoot(bearer)) {
    if (!sandbox) throw notFound();
    return { sandbox, operator: true };
  }
  // Compare against a dummy when the id is unknown so both 404s cost the same.
  const ok = safeEqual(bearer, sandbox?.token ?? "\u0000unknown");
  if (!sandbox || !ok) throw notFound();
  return { sandbox, operator: false };
}

/**
 * Body-token verbs (fork, promote, checkpoint, preview): the header passed the node-level guard (scope); an empty
 * body token on a root request means "operator, by id" where the verb has that path (preview has none);
 * otherwise the body token must be the sandbox's own.
 */
export function bodyTokenAccess<T extends TokenHolder>(
  scope: Scope,
  bodyToken: string | undefined,
  sandbox: T | undefined,
  o: { operatorPath: boolean } = { operatorPath: true },
): { sandbox: T; operator: boolean } {
  if (!bodyToken) {
    if (o.operatorPath && scope.kind === "root" && sandbox) return { sandbox, operator: true };
    throw unknownSandbox();
  }
  const ok = safeEqual(bodyToken, sandbox?.token ?? "\u0000unknown");
  if (!sandbox || !ok) throw unknownSandbox();
  return { sandbox, operator: false };
}

export type AuthKind = "none" | "root" | "tenant" | "sandbox" | "unknown";
