// The Pod contract (§4): which annotations go in, what comes out, and the claim body they make.
import { podKey } from "#shared/kube/index.ts";
import type { V1OwnerReference, V1Pod } from "@kubernetes/client-node";
import type { ClaimRequest } from "#shared/sandboxd/index.ts";
import { builtTemplateRefusal } from "#shared/built-templates/index.ts";
import { ProviderError } from "./errors.ts";

export const ANNOTATION_RUNTIME = "sandbox.cocoonstack.io/runtime";
export const ANNOTATION_TEMPLATE = "sandbox.cocoonstack.io/template";
export const ANNOTATION_NET = "sandbox.cocoonstack.io/net";
export const ANNOTATION_SIZE = "sandbox.cocoonstack.io/size";
export const ANNOTATION_TTL = "sandbox.cocoonstack.io/ttl-seconds";
/** Out: the claim id, delivered by the status push. The release token never appears on the Pod. */
export const ANNOTATION_CLAIM_ID = "sandbox.cocoonstack.io/claim-id";

export const RUNTIME = "sandboxd";
/** Leases are fixed at claim time and never renewed here, so the default asks for sandboxd's 24 h cap. */
export const DEFAULT_TTL_SECONDS = 86_400;

export function podUID(pod: V1Pod): string {
  return pod.metadata?.uid ?? "";
}

function annotation(pod: V1Pod, name: string): string {
  return pod.metadata?.annotations?.[name] ?? "";
}

/** The Pod's controller ownerReference, if any. */
export function controllerRef(pod: V1Pod): V1OwnerReference | undefined {
  return pod.metadata?.ownerReferences?.find((r) => r.controller === true);
}

/** Step 1 of a create, before anything else (adoption included): absent or empty means sandboxd. */
export function checkRuntime(pod: V1Pod): void {
  const runtime = annotation(pod, ANNOTATION_RUNTIME);
  if (runtime !== "" && runtime !== RUNTIME) {
    throw new ProviderError(
      "invalid-pod",
      `unsupported runtime ${JSON.stringify(runtime)} in ${ANNOTATION_RUNTIME}: this node serves only ${RUNTIME}`,
      { pod: podKey(pod) },
    );
  }
}

/**
 * The ttl annotation: absent/empty = 86400; an optionally signed decimal integer; negative or non-integer is
 * an error; 0 = undefined, which omits `ttl_seconds` so sandboxd applies its own 5-minute default.
 */
export function parseTtl(pod: V1Pod): number | undefined {
  const raw = annotation(pod, ANNOTATION_TTL);
  if (raw === "") return DEFAULT_TTL_SECONDS;
  const n = /^[+-]?\d+$/.test(raw) ? Number(raw) : Number.NaN;
  if (!Number.isSafeInteger(n) || n < 0) {
    throw new ProviderError(
      "invalid-pod",
      `invalid ${ANNOTATION_TTL} ${JSON.stringify(raw)}: want a non-negative integer number of seconds`,
      { pod: podKey(pod) },
    );
  }
  return n === 0 ? undefined : n;
}

/**
 * Steps 6–7: ttl first, then the required template (a built template only of the Pod's own namespace:
 * shared/built-templates), then the body with `claim_ref: "<ns>/<name>"`.
 */
export function claimRequestFor(pod: V1Pod): ClaimRequest {
  const ttl = parseTtl(pod);
  const template = annotation(pod, ANNOTATION_TEMPLATE);
  if (template === "") {
    throw new ProviderError("invalid-pod", `missing required annotation ${ANNOTATION_TEMPLATE}`, { pod: podKey(pod) });
  }
  const refused = builtTemplateRefusal(template, pod.metadata?.namespace ?? "");
  if (refused) throw new ProviderError("invalid-pod", `${ANNOTATION_TEMPLATE}: ${refused.message}`, { pod: podKey(pod) });
  const req: ClaimRequest = { template };
  // net and size go through unchecked: sandboxd owns the vocabulary and answers 400 for an unknown value.
  const net = annotation(pod, ANNOTATION_NET);
  if (net !== "") req.net = net as ClaimRequest["net"];
  const size = annotation(pod, ANNOTATION_SIZE);
  if (size !== "") req.size = size as ClaimRequest["size"];
  if (ttl !== undefined) req.ttl_seconds = ttl;
  req.claim_ref = podKey(pod);
  return req;
}

/** A copy of the Pod carrying the claim-id annotation (what GetPod returns and the status push sends). */
export function withClaimId(pod: V1Pod, id: string): V1Pod {
  return {
    ...pod,
    metadata: { ...pod.metadata, annotations: { ...pod.metadata?.annotations, [ANNOTATION_CLAIM_ID]: id } },
  };
}
