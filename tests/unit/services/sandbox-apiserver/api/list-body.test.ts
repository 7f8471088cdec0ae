import { describe, expect, test } from "bun:test";
import { listResponse, tableResponse } from "#services/sandbox-apiserver/api/list-body.ts";
import { type TableRequest, toTable } from "#services/sandbox-apiserver/api/table.ts";
import { API_VERSION, LIST_KIND, sandboxFromEntry } from "#services/sandbox-apiserver/sandboxes/object.ts";

// Enough sandboxes to span several streamed chunks, with non-ASCII text so chunking must not split a UTF-8 sequence
// wrongly (chunks are cut between items, never inside one).
const items = Array.from({ length: 3000 }, (_, i) =>
  sandboxFromEntry(
    { name: `ns-${i % 7}/sb-${i}`, id: `sb_${i}`, phase: i % 3 ? "Running" : "Hibernated", template: "t:1", claimRef: `ns-${i % 7}/sb-${i}`, addr: `10.0.${i % 250}.1:7777`, claimedAt: "2026-12-01T00:00:00Z", claimMetadata: `{"owner":"Zoë ✓ ${i}"}` },
    `node-${i % 5}`,
  ),
);

describe("streamed list bodies", () => {
  for (const version of ["v1", "v1beta1"] as const) {
    for (const includeObject of ["None", "Metadata", "Object"] as const) {
      for (const noHeaders of [false, true]) {
        const t: TableRequest = { version, includeObject, noHeaders };
        test(`Table ${version} includeObject=${includeObject} noHeaders=${noHeaders} is byte-equal to the whole Table stringified`, async () => {
          const want = JSON.stringify(toTable(items, t));
          expect(await tableResponse(items, t).text()).toBe(want);
          // A second list gives the same bytes.
          expect(await tableResponse(items, t).text()).toBe(want);
        });
      }
    }
  }

  test("the SandboxList is byte-equal to the list object stringified, and an empty one has items []", async () => {
    expect(await listResponse(items).text()).toBe(JSON.stringify({ kind: LIST_KIND, apiVersion: API_VERSION, metadata: { resourceVersion: "" }, items }));
    const empty = (await listResponse([]).json()) as { items: unknown[] };
    expect(empty.items).toEqual([]);
    const emptyTable = (await tableResponse([], { version: "v1", includeObject: "Metadata", noHeaders: false }).json()) as { rows: unknown[] };
    expect(emptyTable.rows).toEqual([]);
  });

  test("the body arrives in several chunks, not as one buffer", async () => {
    const reader = tableResponse(items, { version: "v1", includeObject: "Metadata", noHeaders: false }).body!.getReader();
    let chunks = 0;
    for (;;) {
      const { done } = await reader.read();
      if (done) break;
      chunks++;
    }
    expect(chunks).toBeGreaterThan(5);
  });
});
