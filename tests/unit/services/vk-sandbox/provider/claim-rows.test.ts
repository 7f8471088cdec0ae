import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { ClaimRows } from "#services/vk-sandbox/provider/claim-rows.ts";
import type { Claim } from "#services/vk-sandbox/claims/index.ts";

const claim = (id: string): Claim => ({ id, token: "t", address: "", podUID: "", authority: "", claimedAt: 0, deadline: 0 });

describe("ClaimRows (the provider's claims by key, with an ordered entry list for snapshots)", () => {
  test("entriesExcept lists the rows in the Map's order without the skipped keys; a re-added key goes last", () => {
    const rows = new ClaimRows();
    rows.set("ns/a", claim("a")).set("ns/b", claim("b")).set("ns/c", claim("c"));
    rows.set("ns/b", claim("b2")); // replaced in place
    rows.delete("ns/a");
    rows.set("ns/a", claim("a2")); // back at the end
    expect(rows.entriesExcept([]).map(([k, c]) => `${k}=${c.id}`)).toEqual(["ns/b=b2", "ns/c=c", "ns/a=a2"]);
    expect(rows.entriesExcept(["ns/c", "ns/missing"]).map(([k]) => k)).toEqual(["ns/b", "ns/a"]);
    expect([...rows.keys()]).toEqual(["ns/b", "ns/c", "ns/a"]);
  });

  // It must stay a Map in every way the provider uses one: any history of set/delete/clear gives the same entries
  // as a plain Map, and the snapshot list agrees with the Map filtered by the skipped keys.
  test("agrees with a plain Map after every step of a random history", () => {
    const op = fc.record({ kind: fc.constantFrom("set", "set", "delete", "clear", "snapshot"), key: fc.nat(30), skip: fc.array(fc.nat(30), { maxLength: 4 }) });
    fc.assert(
      fc.property(fc.array(op, { maxLength: 200 }), (ops) => {
        const rows = new ClaimRows();
        const map = new Map<string, Claim>();
        let seq = 0;
        for (const o of ops) {
          const key = `ns/p${o.key}`;
          if (o.kind === "set") {
            const c = claim(`sb_${seq++}`);
            rows.set(key, c);
            map.set(key, c);
          } else if (o.kind === "delete") expect(rows.delete(key)).toBe(map.delete(key));
          else if (o.kind === "clear") {
            rows.clear();
            map.clear();
          } else {
            const skip = new Set(o.skip.map((n) => `ns/p${n}`));
            expect(rows.entriesExcept(skip)).toEqual([...map].filter(([k]) => !skip.has(k)));
          }
          expect([...rows]).toEqual([...map]);
          expect(rows.size).toBe(map.size);
        }
      }),
      { numRuns: 200 },
    );
  });
});
