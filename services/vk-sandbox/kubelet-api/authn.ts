// Who is calling the kubelet API, as a kubelet with `--anonymous-auth=false`, `--client-ca-file` and
// `--authentication-token-webhook` decides it (docs/decisions.md#kubelet-api-auth), in kube's union order:
//   1. a client certificate the TLS layer verified against --client-ca-file: CN is the user, O the groups (this is
//      how kube-apiserver calls us for `kubectl logs`/`exec`, with its --kubelet-client-certificate);
//   2. a bearer token: a TokenReview against the cluster (cached, shared/kube/reviews.ts);
//   3. otherwise, or when the credential presented failed, 401: nobody is anonymous here.
// Every authenticated user is also in system:authenticated, as kube's authenticated-group adder makes it.
import type { ReviewedUser, TokenVerdict } from "#shared/kube/index.ts";

/** What the TLS layer learnt about the client's certificate: absent when none was presented. */
export type PeerCert =
  | { verified: true; commonName: string; organizations: string[] }
  | { verified: false; reason: string };

export type AuthnOutcome =
  | { ok: true; user: ReviewedUser; via: "client-certificate" | "token" }
  /** `reason` is for the log; `public` is what the 401 body says (no review internals). */
  | { ok: false; reason: string; public: string; error?: boolean };

export interface TokenReview {
  review(token: string): Promise<TokenVerdict>;
}

export const AUTHENTICATED_GROUP = "system:authenticated";

/** kube's bearer-token authenticator: `Bearer` in any letter case, one non-empty token without spaces. */
export function bearerToken(headers: Headers): string | undefined {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(headers.get("authorization") ?? "");
  return m?.[1];
}

const withAuthenticatedGroup = (u: ReviewedUser): ReviewedUser =>
  u.groups.includes(AUTHENTICATED_GROUP) ? u : { ...u, groups: [...u.groups, AUTHENTICATED_GROUP] };

export class KubeletAuthenticator {
  /** `tokens` undefined: bearer tokens are refused (no cluster to review them with). */
  constructor(private readonly tokens: TokenReview | undefined) {}

  async authenticate(headers: Headers, peer: PeerCert | undefined): Promise<AuthnOutcome> {
    let refused: AuthnOutcome | undefined;
    if (peer?.verified) {
      if (peer.commonName) {
        return { ok: true, via: "client-certificate", user: withAuthenticatedGroup({ name: peer.commonName, groups: peer.organizations }) };
      }
      refused = { ok: false, reason: "client certificate has an empty common name", public: "the client certificate names no user" };
    } else if (peer) {
      refused = { ok: false, reason: `client certificate refused: ${peer.reason}`, public: "the client certificate was not accepted" };
    }
    const token = bearerToken(headers);
    if (token !== undefined) {
      if (!this.tokens) return { ok: false, reason: "bearer tokens are not accepted: no token reviewer", public: "bearer tokens are not accepted" };
      const v = await this.tokens.review(token);
      if (v.ok) return { ok: true, via: "token", user: withAuthenticatedGroup(v.user) };
      return {
        ok: false,
        reason: v.reason,
        public: v.error ? "the token could not be reviewed; try again" : "the token was not accepted",
        ...(v.error ? { error: true } : {}),
      };
    }
    return refused ?? { ok: false, reason: "no credentials", public: "present a bearer token or a client certificate" };
  }
}
