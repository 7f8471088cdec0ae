// Delegated authorization (docs/serving.md "Authorization"): the always-allow paths skip it, `system:masters` is
// always allowed, everything else is a SubjectAccessReview against the cluster, cached both ways (10 s by default).
// A review that cannot be made is a denial (fail closed) and is not cached.
import type { Clock } from "#shared/clock/index.ts";
import type { KubeClient } from "#shared/kube/index.ts";
import { SubjectAccessReviews } from "#shared/kube/index.ts";
import { GROUP, VERSION } from "../sandboxes/index.ts";
import type { UserInfo } from "./authn.ts";
import type { RequestInfo } from "./request-info.ts";
import { TtlCache } from "./ttl-cache.ts";

export interface AuthzDecision {
  allowed: boolean;
  reason?: string;
  /** True when the review itself failed (not cached). */
  error?: boolean;
}

export interface AuthorizerOptions {
  reviewer?: KubeClient;
  alwaysAllowPaths: string[];
  allowedTtlMs: number;
  deniedTtlMs: number;
  clock?: Clock;
}

interface SarStatus {
  status?: { allowed?: boolean; denied?: boolean; reason?: string; evaluationError?: string };
}

export class Authorizer {
  private readonly cache: TtlCache<AuthzDecision>;

  constructor(private readonly o: AuthorizerOptions) {
    this.cache = new TtlCache(o.clock);
  }

  /** Paths that skip authentication checks' outcome too: probes must answer an anonymous kubelet. */
  alwaysAllowed(path: string): boolean {
    return this.o.alwaysAllowPaths.some((p) => (p.endsWith("*") ? path.startsWith(p.slice(0, -1)) : p === path));
  }

  async authorize(user: UserInfo, info: RequestInfo): Promise<AuthzDecision> {
    if (this.alwaysAllowed(info.path)) return { allowed: true };
    if (user.groups.includes("system:masters")) return { allowed: true };
    const reviewer = this.o.reviewer;
    if (!reviewer) return { allowed: false, reason: "no authorization backend is configured", error: true };
    const spec = {
      user: user.name,
      groups: user.groups,
      ...(user.uid ? { uid: user.uid } : {}),
      ...(user.extra ? { extra: user.extra } : {}),
      ...(info.kind === "resource"
        ? {
            resourceAttributes: {
              namespace: info.namespace,
              verb: info.verb,
              group: GROUP,
              version: VERSION,
              resource: info.resource,
              subresource: info.subresource,
              name: info.name,
            },
          }
        : { nonResourceAttributes: { path: info.path, verb: info.verb } }),
    };
    return this.cache.get(
      JSON.stringify(spec),
      (d) => (d.error ? 0 : d.allowed ? this.o.allowedTtlMs : this.o.deniedTtlMs),
      async () => {
        try {
          const r = await reviewer.create<SarStatus>(SubjectAccessReviews, { apiVersion: "authorization.k8s.io/v1", kind: "SubjectAccessReview", spec });
          return { allowed: r.status?.allowed === true, ...(r.status?.reason ? { reason: r.status.reason } : {}) };
        } catch (e) {
          return { allowed: false, reason: `authorization review failed: ${(e as Error).message}`, error: true };
        }
      },
    );
  }
}
