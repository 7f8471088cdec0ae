// The meta.k8s.io Table that `kubectl get` asks for (docs/api.md "Table output"): columns Name, Phase, Mode, Node,
// Template and Age, and for `-o wide` (priority 1) Claim ID, Address and Deadline; row object PartialObjectMetadata by default
// (`includeObject=Metadata`), the full object with `Object`, none with `None`. Cells are computed here, server-side,
// as kube-apiserver's printers do: kubectl prints them verbatim (Age included, so it is rendered against our clock).
import { type Clock, realClock } from "#shared/clock/index.ts";
import type { Sandbox } from "../sandboxes/index.ts";
import { humanAge } from "./age.ts";

export type IncludeObject = "None" | "Metadata" | "Object";

export interface TableRequest {
  /** The meta.k8s.io version the client asked for (v1 or v1beta1). */
  version: "v1" | "v1beta1";
  includeObject: IncludeObject;
  noHeaders: boolean;
  /** The clock Age is measured against (real time when absent). */
  clock?: Pick<Clock, "now">;
}

const P = "sandbox.cocoonstack.io";

const COLUMNS = [
  {
    name: "Name",
    type: "string",
    format: "name",
    description: "Name must be unique within a namespace. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names",
    priority: 0,
  },
  { name: "Phase", type: "string", format: "", description: "The phase the owning node reports (Running, Hibernated, ...).", priority: 0 },
  {
    name: "Mode",
    type: "string",
    format: "",
    description: "spec.operatingMode as the node's phase says: Suspended when hibernated (paused, or asleep when idle), else Running.",
    priority: 0,
  },
  { name: "Node", type: "string", format: "", description: "The node whose sandboxd holds the sandbox (status.nodeName).", priority: 0 },
  { name: "Template", type: "string", format: "", description: "The pool image the sandbox was claimed from.", priority: 0 },
  { name: "Age", type: "string", format: "", description: "Time since the node claimed the sandbox (creationTimestamp).", priority: 0 },
  { name: "Claim ID", type: "string", format: "", description: "The node-local sandboxd claim id (sandbox.cocoonstack.io/claim-id).", priority: 1 },
  { name: "Address", type: "string", format: "", description: "The sandbox's address: the claim's owner address, else its pod IPs.", priority: 1 },
  { name: "Deadline", type: "string", format: "", description: "When the node ends the sandbox's lease (sandbox.cocoonstack.io/deadline).", priority: 1 },
];

/** The Table the Accept header asks for, or undefined when it asks for plain objects. */
export function tableRequest(accept: string | undefined, query: URLSearchParams, clock?: Pick<Clock, "now">): TableRequest | undefined {
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
        ...(clock ? { clock } : {}),
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

const NONE = "<none>";

/** The row's cells in COLUMNS order; a value the node did not report is `<none>`, as kube-apiserver's printers write it. */
export function tableCells(s: Sandbox, nowMs: number): string[] {
  const m = s.metadata;
  const ann = m.annotations ?? {};
  const labels = m.labels ?? {};
  const phase = labels[`${P}/phase`];
  const created = m.creationTimestamp ? Date.parse(m.creationTimestamp) : Number.NaN;
  const address = ann[`${P}/address`] ?? (s.status.podIPs ?? []).join(",");
  return [
    m.name ?? "",
    phase || NONE,
    (typeof s.spec.operatingMode === "string" && s.spec.operatingMode) || NONE,
    s.status.nodeName || NONE,
    labels[`${P}/template`] || NONE,
    Number.isNaN(created) ? "<unknown>" : humanAge(nowMs - created),
    ann[`${P}/claim-id`] || NONE,
    address || NONE,
    ann[`${P}/deadline`] || NONE,
  ];
}

/** One row: the cells, and the object includeObject asks for. */
export function tableRow(s: Sandbox, t: TableRequest, nowMs = (t.clock ?? realClock).now()) {
  const obj = rowObject(s, t);
  return { cells: tableCells(s, nowMs), ...(obj ? { object: obj } : {}) };
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
  const now = (t.clock ?? realClock).now();
  return { ...tableHeader(t, noHeaders), rows: items.map((s) => tableRow(s, t, now)) };
}

/** The JSON text of a Table around its rows: `head` + rows joined by commas + `tail` is the whole Table. */
export function tableEnvelope(t: TableRequest): { head: string; tail: string } {
  return { head: `${JSON.stringify(tableHeader(t, t.noHeaders)).slice(0, -1)},"rows":[`, tail: "]}" };
}
