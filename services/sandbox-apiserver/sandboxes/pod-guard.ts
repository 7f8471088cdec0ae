// Pod-backed sandboxes (docs/api.md "Pod-backed sandboxes", docs/decisions.md): vk-sandbox claims a Pod's microVM
// under claim_ref `<ns>/<pod>`, so that VM shows in the sandboxes view like any other claim. Acting on it through
// this API must not be a way around the Pod's own RBAC: a caller who may fork a sandbox but not exec into the Pod
// would otherwise copy the Pod's memory (its env, its secrets) into a clone whose token it receives. So a
// mutation of a sandbox that a Pod backs also needs the pod permission that does the same thing to the Pod:
//   fork, snapshot -> create pods/exec   (a copy of the running VM is as good as a shell in it)
//   delete         -> delete pods        (ending the VM ends the Pod's workload)
//   pause, resume  -> update pods        (stops or starts the Pod's workload)
// Fork children inherit the parent's claim metadata (sandboxd.md), so they carry the stamp and stay out of the e2b
// surface's reach; checkpoints carry none, so a Pod-backed sandbox's named snapshot is stamped `pod:<ns>/<name>`,
// a name no e2b namespace (a DNS-1123 label) prefixes (POD_SNAPSHOT_PREFIX).
// A sandbox is Pod-backed when its claim carries vk-sandbox's stamp (inventory metadata) or when a Pod of that
// namespace and name exists: live lookups carry no metadata, and a Go-daemon node stamps none. A lookup or review
// that fails is a denial (fail closed), never a pass.
import type { KubeClient } from "#shared/kube/index.ts";
import { Pods, SubjectAccessReviews, isNotFound } from "#shared/kube/index.ts";
import { POD_UID_METADATA_KEY } from "#shared/sandboxd/index.ts";
import { ApiError, forbidden } from "../api/index.ts";
import type { Resolved } from "./store.ts";

/** The authenticated caller, as the serving layer established it. */
export interface Caller {
  name: string;
  groups: string[];
  uid?: string;
  extra?: Record<string, string[]>;
}

/** Prefix of a Pod-backed sandbox's named checkpoints: `pod:<ns>/<name>` is in no e2b namespace. */
export const POD_SNAPSHOT_PREFIX = "pod:";

export type PodAction = "delete" | "pause" | "resume" | "fork" | "snapshot";

interface PodPermission {
  verb: string;
  subresource?: string;
}

export const POD_PERMISSION: Record<PodAction, PodPermission> = {
  delete: { verb: "delete" },
  pause: { verb: "update" },
  resume: { verb: "update" },
  fork: { verb: "create", subresource: "exec" },
  snapshot: { verb: "create", subresource: "exec" },
};

/** What the guard needs from the cluster: whether a Pod exists, and a SubjectAccessReview verdict. */
export interface PodGuardBackend {
  podExists(namespace: string, name: string): Promise<boolean>;
  allowed(caller: Caller, namespace: string, name: string, p: PodPermission): Promise<boolean>;
}

interface SarStatus {
  status?: { allowed?: boolean };
}

/**
 * The backend over the cluster's API with this server's own credentials: Pods read with the main client (RBAC:
 * get pods), reviews made with the --authorization-kubeconfig client like every other SubjectAccessReview.
 */
export function kubePodGuardBackend(kube: KubeClient, reviewer: KubeClient = kube): PodGuardBackend {
  return {
    async podExists(namespace, name) {
      try {
        await kube.get(Pods, name, { namespace });
        return true;
      } catch (e) {
        if (isNotFound(e)) return false;
        throw e;
      }
    },
    async allowed(caller, namespace, name, p) {
      const r = await reviewer.create<SarStatus>(SubjectAccessReviews, {
        apiVersion: "authorization.k8s.io/v1",
        kind: "SubjectAccessReview",
        spec: {
          user: caller.name,
          groups: caller.groups,
          ...(caller.uid ? { uid: caller.uid } : {}),
          ...(caller.extra ? { extra: caller.extra } : {}),
          resourceAttributes: { namespace, verb: p.verb, group: "", version: "v1", resource: "pods", ...(p.subresource ? { subresource: p.subresource } : {}), name },
        },
      });
      return r.status?.allowed === true;
    },
  };
}

function describe(p: PodPermission): string {
  return p.subresource ? `${p.verb} pods/${p.subresource}` : `${p.verb} pods`;
}

export class PodGuard {
  constructor(private readonly backend: PodGuardBackend) {}

  /**
   * Throws 403 unless `caller` may act on the sandbox's Pod too (or no Pod backs it); 503 when that cannot be told.
   * Returns whether a Pod backs the sandbox (its snapshots are then named out of the e2b surface's reach).
   */
  async check(caller: Caller | undefined, namespace: string, name: string, hit: Resolved, action: PodAction): Promise<boolean> {
    const stamped = stampedForPod(hit);
    let backed = stamped;
    if (!backed) {
      try {
        backed = await this.backend.podExists(namespace, name);
      } catch (e) {
        throw new ApiError(503, `cannot tell whether sandbox ${namespace}/${name} is backed by a Pod (get pod: ${(e as Error).message}); refusing to ${action} it`, "ServiceUnavailable", name);
      }
    }
    if (!backed) return false;
    const p = POD_PERMISSION[action];
    if (!caller) throw forbidden(`sandbox ${namespace}/${name} is backed by a Pod; ${action} needs ${describe(p)} and the caller is unknown`, name);
    if (caller.groups.includes("system:masters")) return true;
    let ok: boolean;
    try {
      ok = await this.backend.allowed(caller, namespace, name, p);
    } catch (e) {
      throw forbidden(`sandbox ${namespace}/${name} is backed by a Pod; the review of ${describe(p)} for User "${caller.name}" failed: ${(e as Error).message}`, name);
    }
    if (!ok) {
      throw forbidden(
        `sandboxes.agents.x-k8s.io "${name}" is backed by Pod ${namespace}/${name}: User "${caller.name}" cannot ${action} it without ${describe(p)} in namespace "${namespace}"`,
        name,
      );
    }
    return true;
  }
}

/** vk-sandbox stamps the Pod's UID into the claim's metadata; the inventory echoes it as a JSON object string. */
function stampedForPod(hit: Resolved): boolean {
  const raw = hit.entry.claimMetadata;
  if (!raw) return false;
  try {
    const m = JSON.parse(raw) as unknown;
    return typeof m === "object" && m !== null && typeof (m as Record<string, unknown>)[POD_UID_METADATA_KEY] === "string" && (m as Record<string, string>)[POD_UID_METADATA_KEY] !== "";
  } catch {
    return false;
  }
}
