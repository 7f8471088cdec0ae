// The kubelet API's reviewers, on Kubernetes clients of their own, never the one the pod status pushes and Node
// heartbeats share. A made-up token is a TokenReview (a miss cannot be cached in advance), so TokenReviews take
// from their own bucket without waiting (shared/kube/reviews.ts: an empty one is a 401 at once) and
// SubjectAccessReviews, asked only for an authenticated caller such as the kube-apiserver's `kubectl logs/exec`,
// wait on a separate one that an anonymous flood never touches (docs/decisions.md "review-floods"). Cache lifetimes are the kubelet's defaults
// (authentication.webhook.cacheTTL, authorization.webhook.cacheAuthorizedTTL / cacheUnauthorizedTTL).
import type { Clock } from "#shared/clock/index.ts";
import { AccessReviewer, type KubeClient, type TokenBucket, TokenReviewer } from "#shared/kube/index.ts";
import { KubeletAuthenticator } from "./authn.ts";
import { KubeletAuthorizer } from "./authz.ts";

export const TOKEN_AUTHENTICATED_TTL_MS = 120_000;
export const TOKEN_REJECTED_TTL_MS = 30_000;
export const ACCESS_ALLOWED_TTL_MS = 300_000;
export const ACCESS_DENIED_TTL_MS = 30_000;
/** The SubjectAccessReview client's rate: far above what the apiserver's own calls need. */
export const REVIEW_QPS = 50;
export const REVIEW_BURST = 100;

type Reviews = Pick<KubeClient, "create">;

/**
 * `clients`: one for both reviews (tests), or one each; in the process the access one carries the REVIEW_QPS bucket
 * and the token one none (the TokenReviewer's own bucket bounds it).
 */
export function kubeletDelegation(clients: Reviews | { tokens: Reviews; access: Reviews }, nodeName: string, clock?: Pick<Clock, "now">, tokenLimiter?: TokenBucket) {
  const pair = "tokens" in clients ? clients : { tokens: clients, access: clients };
  const tokens = new TokenReviewer({
    client: pair.tokens,
    authenticatedTtlMs: TOKEN_AUTHENTICATED_TTL_MS,
    rejectedTtlMs: TOKEN_REJECTED_TTL_MS,
    clock,
    ...(tokenLimiter ? { limiter: tokenLimiter } : {}),
  });
  const access = new AccessReviewer({ client: pair.access, allowedTtlMs: ACCESS_ALLOWED_TTL_MS, deniedTtlMs: ACCESS_DENIED_TTL_MS, clock });
  return { authenticator: new KubeletAuthenticator(tokens), authorizer: new KubeletAuthorizer(access, nodeName) };
}
