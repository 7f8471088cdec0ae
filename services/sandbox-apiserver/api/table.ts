// The meta.k8s.io Table that `kubectl get` asks for (docs/api.md "Table output"): columns Name and Created At, row
// object PartialObjectMetadata by default (`includeObject=Metadata`), the full object with `Object`, none with `None`.
import type { Sandbox } from "../sandboxes/index.ts";

export type IncludeObject = "None" | "Metadata" | "Object";

export interface TableRequest {
  /** The meta.k8s.io version the client asked for (v1 or v1beta1). */
  version: "v1" | "v1beta1";
  includeObject: IncludeObject;
  noHeaders: boolean;
}

const COLUMNS = [
  {
    name: "Name",
    type: "string",
    format: "name",
    description: "Name must be unique within a namespace. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names",
    priority: 0,
  },
  { name: "Created At", type: "date", format: "", description: "When the node claimed the sandbox (creationTimestamp).", priority: 0 },
];

const ZERO_TIME = "0001-01-01T00:00:00Z";

/** The Table the Accept header asks for, or undefined when it asks for plain objects. */
export function tableRequest(accept: string | undefined, query: URLSearchParams): TableRequest | undefined {
  if (!accept) return undefined;
  for (const part of accept.split(",")) {
    const params = new Map(
      part
        .split(";")
        .slice(1)
        .map((kv) => kv.trim().split("=") as [string, string]),
    );
    if (params.get("as") === "Table" && params.get("g") === "meta.k8s.io" && (params.get("v") === "v1" || params.get("v") === "v1beta1")) {
      const inc = query.get("includeObject");
      return {
        version: params.get("v") as "v1" | "v1beta1",
        includeObject: inc === "None" || inc === "Object" ? inc : "Metadata",
        noHeaders: query.get("noHeaders") === "true",
      };
    }
  }
  return undefined;
}

function rowObject(s: Sandbox, t: TableRequest): object | undefined {
  if (t.includeObject === "None") return undefined;
  if (t.includeObject === "Object") return s;
  return { kind: "PartialObjectMetadata", apiVersion: `meta.k8s.io/${t.version}`, metadata: s.metadata };
}

/** One row: the spec's cells, and the object includeObject asks for. */
export function tableRow(s: Sandbox, t: TableRequest) {
  const obj = rowObject(s, t);
  return { cells: [s.metadata.name ?? "", s.metadata.creationTimestamp || ZERO_TIME], ...(obj ? { object: obj } : {}) };
}

function tableHeader(t: TableRequest, noHeaders: boolean) {
  return {
    kind: "Table",
    apiVersion: `meta.k8s.io/${t.version}`,
    metadata: { resourceVersion: "" },
    ...(noHeaders ? {} : { columnDefinitions: COLUMNS }),
  };
}

export function toTable(items: readonly Sandbox[], t: TableRequest, noHeaders = t.noHeaders) {
  return { ...tableHeader(t, noHeaders), rows: items.map((s) => tableRow(s, t)) };
}

/** The JSON text of a Table around its rows: `head` + rows joined by commas + `tail` is the whole Table. */
export function tableEnvelope(t: TableRequest): { head: string; tail: string } {
  return { head: `${JSON.stringify(tableHeader(t, t.noHeaders)).slice(0, -1)},"rows":[`, tail: "]}" };
}
