// The kubelet API's reviewers, on their own Kubernetes client and token bucket: a flood of made-up tokens (each one
// a TokenReview, since a miss cannot be cached in advance) then waits on this bucket and never on the one the
// pod status pushes and Node heartbeats share. Cache lifetimes are the kubelet's defaults
// (authentication.webhook.cacheTTL, authorization.webhook.cacheAuthorizedTTL / cacheUnauthorizedTTL).
import type { Clock } from "#shared/clock/index.ts";
import { AccessReviewer, type KubeClient, TokenReviewer } from "#shared/kube/index.ts";
import { KubeletAuthenticator } from "./authn.ts";
import { KubeletAuthorizer } from "./authz.ts";

export const TOKEN_AUTHENTICATED_TTL_MS = 120_000;
export const TOKEN_REJECTED_TTL_MS = 30_000;
export const ACCESS_ALLOWED_TTL_MS = 300_000;
export const ACCESS_DENIED_TTL_MS = 30_000;
/** The reviewers' own client-side rate: far above what the apiserver's own calls need, far below a flood. */
export const REVIEW_QPS = 50;
export const REVIEW_BURST = 100;

export function kubeletDelegation(client: Pick<KubeClient, "create">, nodeName: string, clock?: Pick<Clock, "now">) {
  const tokens = new TokenReviewer({ client, authenticatedTtlMs: TOKEN_AUTHENTICATED_TTL_MS, rejectedTtlMs: TOKEN_REJECTED_TTL_MS, clock });
  const access = new AccessReviewer({ client, allowedTtlMs: ACCESS_ALLOWED_TTL_MS, deniedTtlMs: ACCESS_DENIED_TTL_MS, clock });
  return { authenticator: new KubeletAuthenticator(tokens), authorizer: new KubeletAuthorizer(access, nodeName) };
}
