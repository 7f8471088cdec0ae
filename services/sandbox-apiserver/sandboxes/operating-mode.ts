// spec.operatingMode on an aggregated sandbox (docs/api.md "Suspend and resume"; issue 28 item 3): `Suspended`
// hibernates the sandbox on its node, `Running` wakes it. The mode is read back from the node's phase, so a sandbox
// that went to sleep by itself (an idle pool) reads `Suspended` too. A PATCH (merge, strategic merge or JSON patch)
// or a PUT may change spec.operatingMode and nothing else: every other field of a sandbox is the node's and is
// refused with a 422 naming it. The change needs what the pause and resume subresources need (`create
// sandboxes/pause` or `sandboxes/resume`, reviewed for the caller, plus the Pod guard for a Pod-backed sandbox), on
// top of the `patch`/`update` the aggregator already authorized.
import { type KubeClient, SubjectAccessReviews } from "#shared/kube/index.ts";
import { ApiError, badRequest, forbidden } from "../api/index.ts";
import { type OperatingMode, type Sandbox, modeOfPhase } from "./object.ts";
import type { Caller } from "./pod-guard.ts";

export { modeOfPhase, type OperatingMode };
export const OPERATING_MODES: readonly OperatingMode[] = ["Running", "Suspended"];

export const MERGE_PATCH = "application/merge-patch+json";
export const STRATEGIC_PATCH = "application/strategic-merge-patch+json";
export const JSON_PATCH = "application/json-patch+json";

/**
 * A 422 Invalid as kube-apiserver words one: `Sandbox.agents.x-k8s.io "x" is invalid: <field>: <why>`, with the
 * field error in details.causes (what kubectl prints). `why` starts with the field error's kind.
 */
function invalid(name: string, field: string, why: string): ApiError {
  const kind = why.startsWith("Forbidden") ? "FieldValueForbidden" : why.startsWith("Unsupported value") ? "FieldValueNotSupported" : "FieldValueInvalid";
  return new ApiError(422, `Sandbox.agents.x-k8s.io "${name}" is invalid: ${field}: ${why}`, "Invalid", name, { causes: [{ reason: kind, message: why, field }] });
}

const ONLY_MODE = "Forbidden: only spec.operatingMode may change on an existing sandbox (the rest is its node's)";

function checkMode(v: unknown, name: string): OperatingMode {
  if (typeof v === "string" && (OPERATING_MODES as readonly string[]).includes(v)) return v as OperatingMode;
  throw invalid(name, "spec.operatingMode", `Unsupported value: ${JSON.stringify(v)}: supported values: "Running", "Suspended"`);
}

function parseJson(text: string, name: string, what: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch (e) {
    throw badRequest(`the ${what} is not valid JSON: ${(e as Error).message}`, name);
  }
}

/** JSON with object keys sorted: equal values compare equal whatever order a client wrote their keys in. */
function stable(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(stable).join(",")}]`;
  if (isObject(v)) return `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${stable(v[k])}`).join(",")}}`;
  return JSON.stringify(v) ?? "null";
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * metadata in a patch or PUT body may only repeat what the object already says (name, namespace, a
 * resourceVersion); labels, annotations and the rest are the node's (rendered from its inventory).
 */
function checkMetadata(meta: unknown, current: Sandbox, name: string): void {
  if (meta === undefined || meta === null) return;
  if (!isObject(meta)) throw invalid(name, "metadata", "Invalid value: not an object");
  for (const [k, v] of Object.entries(meta)) {
    if (k === "resourceVersion" || k === "uid" || k === "creationTimestamp" || k === "generation" || k === "managedFields") continue;
    if (k === "name" || k === "namespace") {
      if (v !== current.metadata[k]) throw invalid(name, `metadata.${k}`, `Invalid value: ${JSON.stringify(v)}: field is immutable`);
      continue;
    }
    const now = (current.metadata as Record<string, unknown>)[k];
    if (stable(v) !== stable(now)) throw invalid(name, `metadata.${k}`, ONLY_MODE);
  }
}

/** The spec of a body: only operatingMode, which is returned (undefined = not given). */
function specMode(spec: unknown, name: string): OperatingMode | undefined {
  if (spec === undefined || spec === null) return undefined;
  if (!isObject(spec)) throw invalid(name, "spec", "Invalid value: not an object");
  for (const k of Object.keys(spec)) if (k !== "operatingMode") throw invalid(name, `spec.${k}`, ONLY_MODE);
  // A merge patch's null removes the field: back to the default, Running.
  if (spec.operatingMode === null) return "Running";
  return spec.operatingMode === undefined ? undefined : checkMode(spec.operatingMode, name);
}

/**
 * The mode a PATCH or PUT asks for (undefined: it asks for none, e.g. a patch that repeats the object), or the
 * refusal. `contentType` is the PATCH's media type; a PUT passes undefined.
 */
export function requestedMode(contentType: string | undefined, text: string, current: Sandbox, name: string): OperatingMode | undefined {
  const put = contentType === undefined;
  const type = (contentType ?? "").split(";")[0]!.trim().toLowerCase();
  if (!put && type !== MERGE_PATCH && type !== STRATEGIC_PATCH && type !== JSON_PATCH) {
    throw new ApiError(415, `the patch type ${JSON.stringify(type)} is not supported on sandboxes: use ${MERGE_PATCH}, ${STRATEGIC_PATCH} or ${JSON_PATCH}`, "UnsupportedMediaType", name);
  }
  const body = parseJson(text, name, put ? "sandbox" : "patch");
  if (type === JSON_PATCH) {
    if (!Array.isArray(body)) throw badRequest("a JSON patch is a list of operations", name);
    let mode: OperatingMode | undefined;
    for (const op of body) {
      if (!isObject(op)) throw badRequest("a JSON patch operation is an object", name);
      if (op.op === "test") continue;
      if (op.path !== "/spec/operatingMode") throw invalid(name, String(op.path).replace(/^\//, "").replaceAll("/", ".") || "(root)", ONLY_MODE);
      if (op.op === "remove") mode = "Running";
      else if (op.op === "add" || op.op === "replace") mode = checkMode(op.value, name);
      else throw invalid(name, "spec.operatingMode", `Forbidden: the JSON patch operation ${JSON.stringify(op.op)} cannot set it`);
    }
    return mode;
  }
  if (!isObject(body)) throw badRequest(`the ${put ? "sandbox" : "patch"} is not a JSON object`, name);
  for (const k of Object.keys(body)) {
    if (k === "apiVersion" || k === "kind" || k === "status") continue; // status: the node's; a PUT echoes it
    if (k !== "metadata" && k !== "spec") throw invalid(name, k, ONLY_MODE);
  }
  checkMetadata(body.metadata, current, name);
  return specMode(body.spec, name);
}

/** Whether a caller may create a sandboxes subresource (SubjectAccessReview with this server's reviewer client). */
export type SubresourceReview = (caller: Caller, namespace: string, name: string, subresource: "pause" | "resume") => Promise<boolean>;

interface SarStatus {
  status?: { allowed?: boolean };
}

export function kubeSubresourceReview(reviewer: Pick<KubeClient, "create">): SubresourceReview {
  return async (caller, namespace, name, subresource) => {
    const r = await reviewer.create<SarStatus>(SubjectAccessReviews, {
      apiVersion: "authorization.k8s.io/v1",
      kind: "SubjectAccessReview",
      spec: {
        user: caller.name,
        groups: caller.groups,
        ...(caller.uid ? { uid: caller.uid } : {}),
        ...(caller.extra ? { extra: caller.extra } : {}),
        resourceAttributes: { namespace, verb: "create", group: "agents.x-k8s.io", version: "v1beta1", resource: "sandboxes", subresource, name },
      },
    });
    return r.status?.allowed === true;
  };
}

/**
 * Throws 403 unless the caller may do what the mode change does through the subresource (fail closed: no caller, no
 * reviewer or a failed review is a denial; system:masters passes as in kube-apiserver).
 */
export async function authorizeModeChange(review: SubresourceReview | undefined, caller: Caller | undefined, namespace: string, name: string, mode: OperatingMode): Promise<void> {
  const sub = mode === "Suspended" ? "pause" : "resume";
  const denied = (why: string) =>
    forbidden(`sandboxes.agents.x-k8s.io "${name}" is forbidden: spec.operatingMode ${mode} needs create on sandboxes/${sub} in namespace "${namespace}", as the ${sub} subresource does; ${why}`, name);
  if (!caller) throw denied("the caller is unknown");
  if (caller.groups.includes("system:masters")) return;
  if (!review) throw denied("this server cannot review it");
  let ok: boolean;
  try {
    ok = await review(caller, namespace, name, sub);
  } catch (e) {
    throw denied(`the review for User "${caller.name}" failed: ${(e as Error).message}`);
  }
  if (!ok) throw denied(`User "${caller.name}" may not`);
}
