// Delegated authorization (docs/serving.md "Authorization"): the always-allow paths skip it, `system:masters` is
// always allowed, everything else is a SubjectAccessReview against the cluster (shared/kube/reviews.ts), cached both
// ways (10 s by default). A review that cannot be made is a denial (fail closed) and is not cached.
import type { Clock } from "#shared/clock/index.ts";
import { type AccessAttributes, AccessReviewer, type AccessVerdict, type KubeClient } from "#shared/kube/index.ts";
import { GROUP, VERSION } from "../sandboxes/index.ts";
import type { UserInfo } from "./authn.ts";
import type { RequestInfo } from "./request-info.ts";

export type AuthzDecision = AccessVerdict;

export interface AuthorizerOptions {
  reviewer?: KubeClient;
  alwaysAllowPaths: string[];
  allowedTtlMs: number;
  deniedTtlMs: number;
  clock?: Clock;
}

export class Authorizer {
  private readonly access: AccessReviewer | undefined;

  constructor(private readonly o: AuthorizerOptions) {
    this.access = o.reviewer
      ? new AccessReviewer({ client: o.reviewer, allowedTtlMs: o.allowedTtlMs, deniedTtlMs: o.deniedTtlMs, clock: o.clock })
      : undefined;
  }

  /** Paths that skip authentication checks' outcome too: probes must answer an anonymous kubelet. */
  alwaysAllowed(path: string): boolean {
    return this.o.alwaysAllowPaths.some((p) => (p.endsWith("*") ? path.startsWith(p.slice(0, -1)) : p === path));
  }

  async authorize(user: UserInfo, info: RequestInfo): Promise<AuthzDecision> {
    if (this.alwaysAllowed(info.path)) return { allowed: true };
    if (user.groups.includes("system:masters")) return { allowed: true };
    if (!this.access) return { allowed: false, reason: "no authorization backend is configured", error: true };
    return this.access.review(user, attributesOf(info));
  }
}

/** The SubjectAccessReview attributes of a request: this server's group and version for a resource. */
function attributesOf(info: RequestInfo): AccessAttributes {
  if (info.kind !== "resource") return { nonResourceAttributes: { path: info.path, verb: info.verb } };
  return {
    resourceAttributes: {
      namespace: info.namespace,
      verb: info.verb,
      group: GROUP,
      version: VERSION,
      resource: info.resource,
      subresource: info.subresource,
      name: info.name,
    },
  };
}
