// Decoding a Sandbox from a request body (docs/api.md "Field validation"): `fieldValidation=Strict` turns unknown
// fields into a 400 naming them, `Warn` (the default, as kube-apiserver) into `Warning` headers, `Ignore` drops
// them. Known fields are those of the upstream agent-sandbox v1beta1 Sandbox down to the pod template; the pod
// template's interior is the PodSpec, which is not modelled here and is passed through as the node needs only
// container 0's image and resources. Names must be DNS-1123 subdomains (spec README decision).
import { z } from "zod";
import { API_VERSION, KIND, type Sandbox } from "../sandboxes/index.ts";
import { badRequest } from "./status.ts";

export type FieldValidation = "Ignore" | "Warn" | "Strict";

/**
 * The largest request body the server reads: 1.5 MiB. A Sandbox is a Kubernetes object, and upstream stores it in
 * etcd, whose default request limit (--max-request-bytes) is 1.5 MiB, so no Sandbox (nor a fork, snapshot or delete
 * options body) is larger. Bigger bodies are refused with 413 RequestEntityTooLarge (docs/serving.md "Limits").
 */
export const MAX_REQUEST_BODY_BYTES = 1536 * 1024;

const TOP = new Set(["apiVersion", "kind", "metadata", "spec", "status"]);
const META = new Set([
  "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation", "creationTimestamp",
  "deletionTimestamp", "deletionGracePeriodSeconds", "labels", "annotations", "ownerReferences", "finalizers", "managedFields",
]);
const SPEC = new Set(["podTemplate", "volumeClaimTemplates", "service", "shutdownTime", "shutdownPolicy", "operatingMode", "replicas", "lifecycle"]);
const POD_TEMPLATE = new Set(["metadata", "spec"]);
const STATUS = new Set(["serviceFQDN", "service", "conditions", "selector", "podIPs", "nodeName", "replicas", "labelSelector"]);

const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

export function fieldValidationOf(v: string | null): FieldValidation {
  if (v === null || v === "") return "Warn";
  if (v === "Ignore" || v === "Warn" || v === "Strict") return v;
  throw badRequest(`invalid fieldValidation value "${v}": must be one of Ignore, Warn, Strict`);
}

function unknownIn(obj: unknown, known: Set<string>, path: string, out: string[]): void {
  if (obj === null || typeof obj !== "object" || Array.isArray(obj)) return;
  for (const k of Object.keys(obj)) if (!known.has(k)) out.push(path ? `${path}.${k}` : k);
}

const Shape = z.object({
  apiVersion: z.string().optional(),
  kind: z.string().optional(),
  metadata: z
    .object({
      name: z.string().optional(),
      generateName: z.string().optional(),
      namespace: z.string().optional(),
      labels: z.record(z.string(), z.string()).optional(),
      annotations: z.record(z.string(), z.string()).optional(),
    })
    .passthrough()
    .optional(),
  spec: z.record(z.string(), z.unknown()).optional(),
  status: z.record(z.string(), z.unknown()).optional(),
});

export interface Decoded {
  sandbox: Sandbox;
  /** Unknown fields under Warn, for `Warning: 299` headers. */
  warnings: string[];
}

/** Decodes and validates a create body for namespace `namespace`. Throws ApiError 400 on anything malformed. */
export function decodeSandbox(text: string, namespace: string, validation: FieldValidation): Decoded {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    throw badRequest(`the body of the request was not valid JSON: ${(e as Error).message}`);
  }
  const parsed = Shape.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw badRequest(`invalid Sandbox: ${issue.path.join(".") || "body"}: ${issue.message}`);
  }
  const v = parsed.data;
  const name = v.metadata?.name ?? "";
  if (v.apiVersion !== undefined && v.apiVersion !== API_VERSION) throw badRequest(`apiVersion "${v.apiVersion}" is not ${API_VERSION}`, name);
  if (v.kind !== undefined && v.kind !== KIND) throw badRequest(`kind "${v.kind}" is not ${KIND}`, name);
  if (v.metadata?.namespace && v.metadata.namespace !== namespace) {
    throw badRequest(`the namespace of the provided object (${v.metadata.namespace}) does not match the namespace sent on the request (${namespace})`, name);
  }
  if (name && (name.length > 253 || !DNS1123_SUBDOMAIN.test(name))) {
    throw badRequest(
      `metadata.name: Invalid value: "${name}": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character`,
      name,
    );
  }
  const gen = v.metadata?.generateName;
  if (!name && gen && !/^[a-z0-9]([-a-z0-9.]*)?$/.test(gen)) {
    throw badRequest(`metadata.generateName: Invalid value: "${gen}": must be a lowercase RFC 1123 subdomain prefix`);
  }

  const unknown: string[] = [];
  if (validation !== "Ignore") {
    unknownIn(raw, TOP, "", unknown);
    unknownIn(v.metadata, META, "metadata", unknown);
    unknownIn(v.spec, SPEC, "spec", unknown);
    unknownIn(v.spec?.podTemplate, POD_TEMPLATE, "spec.podTemplate", unknown);
    unknownIn(v.status, STATUS, "status", unknown);
  }
  if (validation === "Strict" && unknown.length > 0) {
    throw badRequest(`strict decoding error: ${unknown.map((f) => `unknown field "${f}"`).join(", ")}`, name);
  }
  const sandbox: Sandbox = {
    apiVersion: API_VERSION,
    kind: KIND,
    metadata: { ...(v.metadata ?? {}) },
    spec: v.spec ?? {},
    status: {},
  };
  return { sandbox, warnings: unknown.map((f) => `unknown field "${f}"`) };
}
