// Who may hold a claim, and who may end it.
//
// Adoption (§5.3): a settled row is adoptable by a Pod iff the Pod is the one that holds it, or the Pod's
// authority (controller-owner UID, else its own UID) equals the expected one: the preserved owner's UID while
// `owner` is set, else the recorded `authority`. A table from an older build records neither, and any
// same-key Pod adopts, as it did then.
//
// Delete authorization (§5.5): Pod deletion alone (eviction, a NotReady storm) is never authority over
// the VM. Only a bare Pod, or an owner that is provably gone, deleting, expired or replaced, releases it;
// anything we cannot verify preserves, because a wrongly released sandbox is a user's live session lost,
// while a wrongly preserved one costs a VM until its lease ends.
import type { V1OwnerReference, V1Pod } from "@kubernetes/client-node";
import { pluralize, resourceForKind } from "#shared/kube/index.ts";
import type { Claim, OwnerRef } from "../claims/index.ts";
import { controllerRef, podUID } from "./pod-contract.ts";
import type { OwnerLookup, OwnerReader, OwnerTarget } from "./types.ts";

/** UID of the Pod's controller owner, else the Pod's own UID. */
export function authorityOf(pod: V1Pod): string {
  return controllerRef(pod)?.uid || podUID(pod);
}

export function adoptable(row: Claim, pod: V1Pod): boolean {
  if (row.podUID !== "" && row.podUID === podUID(pod)) return true;
  const expected = row.owner ? row.owner.uid : row.authority;
  if (!expected) return true;
  return authorityOf(pod) === expected;
}

/** The ownerReference as stored in the table's `owner` member. */
export function ownerRefOf(ref: V1OwnerReference): OwnerRef {
  const o: OwnerRef = { apiVersion: ref.apiVersion, kind: ref.kind, name: ref.name, uid: ref.uid };
  if (ref.controller !== undefined) o.controller = ref.controller;
  if (ref.blockOwnerDeletion !== undefined) o.blockOwnerDeletion = ref.blockOwnerDeletion;
  return o;
}

/**
 * English plural of a lower-cased kind, the way Kubernetes names most resources: s/x/z/ch/sh + "es",
 * consonant + y -> "ies", else + "s". Never a naive "+s" (sandbox -> sandboxes, policy -> policies).
 * The kube client's rule (shared/kube/resources.ts), so an owner is read at the path the client would use.
 */
export const pluralOf: (kind: string) => string = pluralize;

/**
 * group/version from apiVersion ("v1" = core) and the plural resource, or undefined when the kind is empty
 * or the apiVersion does not parse (empty, more than one "/", an empty part): such an owner is unverifiable.
 */
export function ownerTargetOf(ref: OwnerRef): OwnerTarget | undefined {
  const r = resourceForKind(ref.apiVersion, ref.kind, true);
  if (!r) return undefined;
  return { apiVersion: ref.apiVersion, kind: ref.kind, name: ref.name, uid: ref.uid, group: r.group, version: r.version, resource: r.resource };
}

export type DeleteVerdict = { action: "release" | "preserve"; reason: string };

const release = (reason: string): DeleteVerdict => ({ action: "release", reason });
const preserve = (reason: string): DeleteVerdict => ({ action: "preserve", reason });

/** The delete-authorization table, in order. `ref` undefined = bare Pod. Never throws. */
export async function authorizeRelease(
  ref: OwnerRef | undefined,
  namespace: string,
  reader: OwnerReader | undefined,
): Promise<DeleteVerdict> {
  if (!ref) return release("bare pod");
  if (!reader) return preserve("no owner reader");
  const target = ownerTargetOf(ref);
  if (!target) return preserve(`owner ${ref.kind || "(no kind)"} ${JSON.stringify(ref.apiVersion)} is not resolvable`);
  let found: OwnerLookup;
  try {
    found = await reader(target, namespace);
  } catch (error) {
    found = { outcome: "error", error };
  }
  const what = `${target.resource}.${target.group || "core"} ${namespace}/${ref.name}`;
  switch (found.outcome) {
    case "not-found":
      return found.detailsName === ref.name
        ? release(`owner ${what} not found`)
        : preserve(`404 without the owner's name reading ${what} (resource unverified)`);
    case "error":
      return preserve(`owner ${what} unreadable: ${found.error instanceof Error ? found.error.message : String(found.error)}`);
    case "found": {
      const o = found.object;
      if (o.metadata?.deletionTimestamp) return release(`owner ${what} is being deleted`);
      const ready = o.status?.conditions?.find((c) => c.type === "Ready");
      if (ready?.reason === "SandboxExpired") return release(`owner ${what} expired`);
      if (ref.uid && ref.uid !== (o.metadata?.uid ?? "")) return release(`owner ${what} was replaced (uid changed)`);
      return preserve(`owner ${what} is alive`);
    }
  }
}
