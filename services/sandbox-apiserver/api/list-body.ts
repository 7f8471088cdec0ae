// The body of a list response (docs/api.md "Reads"), encoded a slice of items at a time and streamed. A fleet list is
// large (50,000 sandboxes make a 28 MB Table): built as one object tree and stringified in one piece it held the
// whole tree, the 28 MB string and its UTF-8 copy at once, and the first byte left only after the last item was
// encoded. Here each pull encodes the next few hundred items, so memory stays flat and the aggregator starts
// relaying at once. The bytes equal JSON.stringify of the whole list object.
import { API_VERSION, LIST_KIND, type Sandbox } from "../sandboxes/index.ts";
import { type TableRequest, tableEnvelope, tableRow } from "./table.ts";

/** Items per pull: ~300 KB of Table rows, large enough that per-chunk overhead is noise. */
const ITEMS_PER_CHUNK = 500;

/** A streamed JSON response: `head`, the items' JSON separated by commas, `tail`. */
function streamed(head: string, items: readonly Sandbox[], encode: ((s: Sandbox) => unknown) | undefined, tail: string): Response {
  const utf8 = new TextEncoder();
  let i = 0;
  const body = new ReadableStream<Uint8Array>({
    pull(controller) {
      const slice = items.slice(i, i + ITEMS_PER_CHUNK);
      // `[a,b]` without its brackets is the slice's part of the list.
      const json = slice.length ? JSON.stringify(encode ? slice.map(encode) : slice).slice(1, -1) : "";
      const text = (i === 0 ? head : ",") + json;
      i += slice.length;
      const last = i >= items.length;
      controller.enqueue(utf8.encode(last ? text + tail : text));
      if (last) controller.close();
    },
  });
  return new Response(body, { headers: { "content-type": "application/json" } });
}

/** The SandboxList of `items`, as `{kind, apiVersion, metadata: {resourceVersion: ""}, items}`. */
export function listResponse(items: readonly Sandbox[]): Response {
  const head = `${JSON.stringify({ kind: LIST_KIND, apiVersion: API_VERSION, metadata: { resourceVersion: "" } }).slice(0, -1)},"items":[`;
  return streamed(head, items, undefined, "]}");
}

/** The meta.k8s.io Table of `items` as `t` asks (the same bytes as JSON.stringify(toTable(items, t))). */
export function tableResponse(items: readonly Sandbox[], t: TableRequest): Response {
  const { head, tail } = tableEnvelope(t);
  return streamed(head, items, (s) => tableRow(s, t), tail);
}
