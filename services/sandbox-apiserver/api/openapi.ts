// OpenAPI v2 and v3 for agents.x-k8s.io/v1beta1 (docs/api.md "OpenAPI"): enough for `kubectl explain` (models carry
// x-kubernetes-group-version-kind and descriptions) and for kubectl's create/apply validation. kubectl decides
// whether the server does field validation by finding a PATCH operation for the kind with a `fieldValidation`
// query parameter; the item path therefore lists PATCH (it answers 405 — sandboxes are immutable) so kubectl sends
// `fieldValidation=Strict` instead of refusing the object client-side. Interiors are open objects, as upstream.
import { API_VERSION, GROUP, KIND, LIST_KIND, RESOURCE, VERSION } from "../sandboxes/index.ts";
import { SUBRESOURCES } from "./discovery.ts";

const DEF = "io.x-k8s.agents.v1beta1";
const META = "io.k8s.apimachinery.pkg.apis.meta.v1";
const gvk = (kind: string) => [{ group: GROUP, version: VERSION, kind }];
const open = (description: string) => ({ type: "object", description, "x-kubernetes-preserve-unknown-fields": true });

function models(ref: (name: string) => string) {
  const typeMeta = {
    apiVersion: { type: "string", description: "APIVersion defines the versioned schema of this representation of an object." },
    kind: { type: "string", description: "Kind is a string value representing the REST resource this object represents." },
  };
  const options = (kind: string, description: string, props: Record<string, unknown> = {}) => ({
    type: "object",
    description,
    properties: { ...typeMeta, ...props },
    "x-kubernetes-group-version-kind": gvk(kind),
  });
  return {
    [`${META}.ObjectMeta`]: {
      type: "object",
      description: "ObjectMeta is metadata that all persisted resources must have.",
      properties: {
        name: { type: "string", description: "Name must be unique within a namespace (a DNS-1123 subdomain)." },
        generateName: { type: "string", description: "Prefix of a server-generated name (5 random characters are appended)." },
        namespace: { type: "string", description: "Namespace of the sandbox." },
        uid: { type: "string" },
        resourceVersion: { type: "string", description: "A content hash of the inventory entry; equal content, equal version." },
        creationTimestamp: { type: "string", format: "date-time", description: "When the node claimed the sandbox." },
        labels: { type: "object", additionalProperties: { type: "string" } },
        annotations: { type: "object", additionalProperties: { type: "string" } },
      },
    },
    [`${META}.ListMeta`]: { type: "object", properties: { resourceVersion: { type: "string" }, continue: { type: "string" } } },
    [`${DEF}.Sandbox`]: {
      type: "object",
      description:
        "Sandbox is one claimed microVM, served from the owning node's NodeInventory. Creating one claims a warm " +
        "microVM of the pool key derived from spec.podTemplate; deleting one releases it.",
      properties: {
        ...typeMeta,
        metadata: { $ref: ref(`${META}.ObjectMeta`), description: "Standard object metadata." },
        spec: {
          type: "object",
          description: "The desired sandbox (upstream agent-sandbox v1beta1 SandboxSpec). Not stored: reads return only operatingMode, from the node's phase.",
          properties: {
            podTemplate: open("Pod template: container 0's image is the pool template, its resources pick the size."),
            volumeClaimTemplates: { type: "array", items: open("A PersistentVolumeClaim template."), description: "Accepted, unused." },
            service: open("Accepted, unused."),
            shutdownTime: { type: "string", format: "date-time", description: "Absolute lease end; becomes the claim's TTL (rounded up)." },
            shutdownPolicy: { type: "string", description: "Accepted, unused." },
            operatingMode: {
              type: "string",
              enum: ["Running", "Suspended"],
              description: "Suspended hibernates the sandbox on its node, Running wakes it (PATCH or PUT; the only field that may change). Reads say what the node's phase is.",
            },
          },
          "x-kubernetes-preserve-unknown-fields": true,
        },
        status: {
          type: "object",
          description: "Observed state, from the owning node's inventory.",
          properties: {
            nodeName: { type: "string", description: "The node whose inventory holds the sandbox." },
            podIPs: { type: "array", items: { type: "string" }, description: "The sandbox's address host." },
            conditions: { type: "array", items: open("A condition; Ready follows the reported phase."), description: "Exactly one: Ready." },
            serviceFQDN: { type: "string" },
            service: { type: "string" },
            selector: { type: "string" },
          },
          "x-kubernetes-preserve-unknown-fields": true,
        },
      },
      "x-kubernetes-group-version-kind": gvk(KIND),
    },
    [`${DEF}.SandboxList`]: {
      type: "object",
      description: "SandboxList is every sandbox of the fresh nodes' inventories.",
      required: ["items"],
      properties: {
        ...typeMeta,
        metadata: { $ref: ref(`${META}.ListMeta`) },
        items: { type: "array", items: { $ref: ref(`${DEF}.Sandbox`) } },
      },
      "x-kubernetes-group-version-kind": gvk(LIST_KIND),
    },
    [`${DEF}.SandboxPauseOptions`]: options("SandboxPauseOptions", "Hibernates the sandbox (POST sandboxes/{name}/pause)."),
    [`${DEF}.SandboxResumeOptions`]: options("SandboxResumeOptions", "Wakes the sandbox (POST sandboxes/{name}/resume)."),
    [`${DEF}.SandboxForkOptions`]: options("SandboxForkOptions", "Forks running children on the source's node.", {
      count: { type: "integer", format: "int32", description: "Children to fork; 0 or absent means 1." },
      ttlSeconds: { type: "integer", format: "int64", description: "Lease of each child in seconds." },
    }),
    [`${DEF}.SandboxSnapshotOptions`]: options("SandboxSnapshotOptions", "Checkpoints the sandbox; it keeps running.", {
      name: { type: "string", description: "Checkpoint name, stamped <namespace>/<name> on the node." },
    }),
    [`${DEF}.SandboxForkResult`]: options("SandboxForkResult", "The forked children, in request order.", {
      children: { type: "array", items: open("sandboxID, nodeName, address, token of one child.") },
    }),
    [`${DEF}.SandboxSnapshotResult`]: options("SandboxSnapshotResult", "The checkpoint taken.", {
      snapshotID: { type: "string" },
      name: { type: "string" },
      nodeName: { type: "string" },
      creationTimestamp: { type: "string", format: "date-time" },
    }),
  };
}

const nsParam = { name: "namespace", in: "path", required: true, description: "object name and auth scope", schema: { type: "string" } };
const nameParam = { name: "name", in: "path", required: true, description: "name of the Sandbox", schema: { type: "string" } };
const query = (name: string, type = "string") => ({ name, in: "query", schema: { type } });
const listParams = ["labelSelector", "fieldSelector", "resourceVersion", "timeoutSeconds", "watch", "allowWatchBookmarks", "sendInitialEvents"].map((n) =>
  query(n, n === "timeoutSeconds" ? "integer" : n === "watch" || n === "allowWatchBookmarks" || n === "sendInitialEvents" ? "boolean" : "string"),
);
const writeParams = [query("dryRun"), query("fieldManager"), query("fieldValidation")];

/** The v3 document of agents.x-k8s.io/v1beta1 (served at /openapi/v3/apis/agents.x-k8s.io/v1beta1). */
export function openapiV3() {
  const ref = (n: string) => `#/components/schemas/${n}`;
  const body = (n: string) => ({ content: { "application/json": { schema: { $ref: ref(`${DEF}.${n}`) } } } });
  const op = (id: string, action: string, kind: string, resp: string, code: string, params: unknown[] = [], withBody?: string) => ({
    operationId: id,
    parameters: params,
    ...(withBody ? { requestBody: body(withBody) } : {}),
    responses: { [code]: { description: "OK", ...body(resp) } },
    "x-kubernetes-action": action,
    "x-kubernetes-group-version-kind": { group: GROUP, version: VERSION, kind },
  });
  const base = `/apis/${GROUP}/${VERSION}`;
  const paths: Record<string, unknown> = {
    [`${base}/${RESOURCE}`]: { get: op("listSandboxForAllNamespaces", "list", KIND, "SandboxList", "200", listParams) },
    [`${base}/namespaces/{namespace}/${RESOURCE}`]: {
      parameters: [nsParam],
      get: op("listNamespacedSandbox", "list", KIND, "SandboxList", "200", listParams),
      post: op("createNamespacedSandbox", "post", KIND, "Sandbox", "201", writeParams, "Sandbox"),
    },
    [`${base}/namespaces/{namespace}/${RESOURCE}/{name}`]: {
      parameters: [nsParam, nameParam],
      get: op("readNamespacedSandbox", "get", KIND, "Sandbox", "200"),
      delete: op("deleteNamespacedSandbox", "delete", KIND, "Sandbox", "200", [query("dryRun")]),
      // Answers 405 (immutable); listed so kubectl detects server-side field validation (see the file comment).
      patch: op("patchNamespacedSandbox", "patch", KIND, "Sandbox", "200", writeParams),
    },
  };
  for (const s of SUBRESOURCES) {
    const result = s.name === "fork" ? "SandboxForkResult" : s.name === "snapshot" ? "SandboxSnapshotResult" : s.kind;
    paths[`${base}/namespaces/{namespace}/${RESOURCE}/{name}/${s.name}`] = {
      parameters: [nsParam, nameParam],
      post: op(`create${s.kind}`, "post", s.kind, result, "201", [query("dryRun")], s.kind),
    };
  }
  return {
    openapi: "3.0.0",
    info: { title: "sandbox-apiserver", version: API_VERSION },
    paths,
    components: { schemas: models(ref) },
  };
}

/** The v3 discovery root: the one group-version this server owns. */
export function openapiV3Root() {
  return { paths: { [`apis/${GROUP}/${VERSION}`]: { serverRelativeURL: `/openapi/v3/apis/${GROUP}/${VERSION}` } } };
}

/** Swagger 2.0 (served at /openapi/v2, merged by the aggregator into the cluster's document). */
export function openapiV2() {
  const ref = (n: string) => `#/definitions/${n}`;
  const v3 = openapiV3();
  // Same operations; v2 carries parameters and bodies differently, but kubectl reads only definitions and the GVK
  // extensions from it, so the operations keep their ids and actions with v2 parameter objects.
  const paths: Record<string, Record<string, unknown>> = {};
  for (const [p, item] of Object.entries(v3.paths as Record<string, Record<string, unknown>>)) {
    const out: Record<string, unknown> = {};
    for (const [method, o] of Object.entries(item)) {
      if (method === "parameters") {
        out.parameters = (o as { name: string; in: string }[]).map((x) => ({ name: x.name, in: x.in, required: true, type: "string", uniqueItems: true }));
        continue;
      }
      const op = o as Record<string, unknown>;
      out[method] = {
        operationId: op.operationId,
        consumes: ["application/json"],
        produces: ["application/json"],
        schemes: ["https"],
        parameters: ((op.parameters as { name: string; in: string; schema: { type: string } }[]) ?? []).map((x) => ({
          name: x.name,
          in: x.in,
          type: x.schema.type,
          uniqueItems: true,
        })),
        responses: { 200: { description: "OK" } },
        "x-kubernetes-action": op["x-kubernetes-action"],
        "x-kubernetes-group-version-kind": op["x-kubernetes-group-version-kind"],
      };
    }
    paths[p] = out;
  }
  return { swagger: "2.0", info: { title: "sandbox-apiserver", version: API_VERSION }, paths, definitions: models(ref) };
}
