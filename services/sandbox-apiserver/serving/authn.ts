// Delegated authentication (docs/serving.md "Authentication"), in kube-apiserver's order:
//   1. a client cert from the front-proxy CA (CN in the allowed names, when any are set): the caller is whoever the
//      X-Remote-User / X-Remote-Group / X-Remote-Extra-* headers name (how the aggregator forwards a request); a CN
//      outside the allowed names is refused like an unverified certificate (4);
//   2. a client cert from the client CA: CN is the user, O the groups;
//   3. a bearer token: a TokenReview against the cluster (shared/kube/reviews.ts), cached for
//      --authentication-token-webhook-cache-ttl either way; a token the cluster rejects is a 401, a review that
//      could not be made is a 401 that is not cached;
//   4. a client certificate that neither CA verifies (and no token) is a 401 (client-certs.ts says why);
//   5. otherwise anonymous.
// Identity headers on any other connection are ignored: only the front proxy's cert makes them mean anything.
import type { Clock } from "#shared/clock/index.ts";
import { type KubeClient, type ReviewedUser, TokenReviewer } from "#shared/kube/index.ts";
import { headerLines } from "#shared/secure-front/index.ts";
import type { PeerCert } from "./client-certs.ts";

export type UserInfo = ReviewedUser;

const AUTHENTICATED = "system:authenticated";
const UNAUTHENTICATED = "system:unauthenticated";
export const ANONYMOUS: UserInfo = { name: "system:anonymous", groups: [UNAUTHENTICATED] };

export type AuthnResult = { ok: true; user: UserInfo } | { ok: false; message: string };

export interface RequestHeaderConfig {
  allowedNames: string[];
  usernameHeaders: string[];
  groupHeaders: string[];
  extraHeaderPrefixes: string[];
}

export interface AuthenticatorOptions {
  requestHeader: RequestHeaderConfig;
  /** TokenReview client; undefined disables bearer tokens (no --authentication-kubeconfig and no cluster). */
  tokenReviewer?: KubeClient;
  cacheTtlMs: number;
  clock?: Clock;
}

export class Authenticator {
  private readonly tokens: TokenReviewer | undefined;

  private requestHeader: RequestHeaderConfig;
  private identityNames: { exact: Set<string>; prefixes: string[] };

  constructor(private readonly o: AuthenticatorOptions) {
    this.tokens = o.tokenReviewer
      ? new TokenReviewer({ client: o.tokenReviewer, authenticatedTtlMs: o.cacheTtlMs, rejectedTtlMs: o.cacheTtlMs, clock: o.clock })
      : undefined;
    this.requestHeader = o.requestHeader;
    this.identityNames = lowerNames(o.requestHeader);
  }

  /** The request-header settings in force (a reloaded ConfigMap replaces them). */
  get requestHeaderConfig(): RequestHeaderConfig {
    return this.requestHeader;
  }

  setRequestHeader(cfg: RequestHeaderConfig): void {
    this.requestHeader = cfg;
    this.identityNames = lowerNames(cfg);
  }

  /**
   * As the generic apiserver's AuthenticatedGroupAdder: every authenticated user is in system:authenticated, unless
   * it already names system:authenticated or system:unauthenticated. `system:anonymous` stays anonymous however it
   * arrived (a forwarded header included): system:unauthenticated, never system:authenticated.
   */
  async authenticate(headers: Headers, peer: PeerCert | undefined): Promise<AuthnResult> {
    const r = await this.identify(headers, peer);
    if (!r.ok || r.user === ANONYMOUS) return r;
    const groups = r.user.groups;
    if (r.user.name === ANONYMOUS.name) {
      const kept = groups.filter((g) => g !== AUTHENTICATED && g !== UNAUTHENTICATED);
      return { ok: true, user: { ...r.user, groups: [...kept, UNAUTHENTICATED] } };
    }
    if (groups.includes(AUTHENTICATED) || groups.includes(UNAUTHENTICATED)) return r;
    return { ok: true, user: { ...r.user, groups: [...groups, AUTHENTICATED] } };
  }

  /** Whether a (lower-cased) header name carries identity under the settings in force (asked per header line). */
  isIdentityHeader(lowerName: string): boolean {
    return this.identityNames.exact.has(lowerName) || this.identityNames.prefixes.some((p) => lowerName.startsWith(p));
  }

  private async identify(headers: Headers, peer: PeerCert | undefined): Promise<AuthnResult> {
    let refused: string | undefined;
    if (peer?.source === "requestheader") {
      const allowed = this.requestHeader.allowedNames;
      if (allowed.length === 0 || allowed.includes(peer.commonName)) {
        const user = fromRequestHeaders(headers, this.requestHeader);
        if (user) return { ok: true, user };
      } else {
        refused = `front-proxy client certificate CN "${peer.commonName}" is not in the allowed names (${allowed.join(", ")})`;
      }
    }
    if (peer?.source === "rejected") refused = peer.reason;
    if (peer?.source === "client" && peer.commonName) {
      return { ok: true, user: { name: peer.commonName, groups: peer.organizations } };
    }
    const auth = headers.get("authorization");
    const m = auth ? /^Bearer\s+(\S+)\s*$/i.exec(auth) : null;
    if (m) return this.reviewToken(m[1]!);
    // As kube's union authenticator: a credential that failed is a 401, never anonymous.
    if (refused) return { ok: false, message: refused };
    return { ok: true, user: ANONYMOUS };
  }

  private async reviewToken(token: string): Promise<AuthnResult> {
    if (!this.tokens) return { ok: false, message: "Unauthorized" };
    const v = await this.tokens.review(token);
    if (v.ok) return { ok: true, user: v.user };
    // A rejection says only "Unauthorized", as kube-apiserver does; a failed review says why (for the log).
    return { ok: false, message: v.error ? v.reason : "Unauthorized" };
  }
}

/**
 * The identity the front proxy forwarded; undefined when it named no user. Read as kube-apiserver reads it: the user
 * is the first line of the first username header that has one, and every line of a group or extra header is one
 * value, commas included (the TLS front escapes each line, internal-headers.ts, so the ", " join of Fetch's Headers
 * cannot merge or split them).
 */
export function fromRequestHeaders(headers: Headers, cfg: RequestHeaderConfig): UserInfo | undefined {
  let name = "";
  for (const h of cfg.usernameHeaders) {
    const v = headerLines(headers.get(h))[0];
    if (v) {
      name = v;
      break;
    }
  }
  if (!name) return undefined;
  const groups: string[] = [];
  for (const h of cfg.groupHeaders) groups.push(...headerLines(headers.get(h)).filter(Boolean));
  const prefixes = cfg.extraHeaderPrefixes.map((p) => p.toLowerCase());
  const extra: Record<string, string[]> = {};
  headers.forEach((value, key) => {
    const k = key.toLowerCase();
    const p = prefixes.find((x) => k.startsWith(x));
    if (p === undefined) return;
    const extraKey = unescapeExtraKey(k.slice(p.length));
    (extra[extraKey] ??= []).push(...headerLines(value));
  });
  return { name, groups, ...(Object.keys(extra).length ? { extra } : {}) };
}

function lowerNames(cfg: RequestHeaderConfig): { exact: Set<string>; prefixes: string[] } {
  return {
    exact: new Set([...cfg.usernameHeaders, ...cfg.groupHeaders].map((h) => h.toLowerCase())),
    prefixes: cfg.extraHeaderPrefixes.map((p) => p.toLowerCase()),
  };
}

/** As kube's url.PathUnescape of the key: a key that does not unescape is kept as sent. */
function unescapeExtraKey(k: string): string {
  try {
    return decodeURIComponent(k);
  } catch {
    return k;
  }
}

/** Header names that carry identity: stripped from every request before routing, whatever authenticated it. */
export function identityHeaderNames(cfg: RequestHeaderConfig, headers: Headers): string[] {
  const exact = new Set([...cfg.usernameHeaders, ...cfg.groupHeaders].map((h) => h.toLowerCase()));
  const prefixes = cfg.extraHeaderPrefixes.map((p) => p.toLowerCase());
  const out: string[] = [];
  headers.forEach((_v, key) => {
    const k = key.toLowerCase();
    if (exact.has(k) || prefixes.some((p) => k.startsWith(p))) out.push(k);
  });
  return out;
}
