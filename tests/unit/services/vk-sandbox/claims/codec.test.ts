import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { ClaimsFileSchema, type Claim } from "#services/vk-sandbox/claims/schema.ts";
import { decodeTable, encodeTable, TableEncoder } from "#services/vk-sandbox/claims/codec.ts";
import { ClaimsStateError } from "#services/vk-sandbox/claims/errors.ts";
import { formatRfc3339Seconds, parseGoTime } from "#shared/clock/index.ts";

const T0 = Date.UTC(2026, 6, 27, 2, 15, 0);
const full: Claim = {
  id: "sb_0123456789abcdef",
  token: "tok",
  address: "10.0.0.5:7777",
  podUID: "6f1c",
  authority: "9a2e",
  claimedAt: T0,
  deadline: T0 + 86_400_000,
  owner: { apiVersion: "agents.x-k8s.io/v1beta1", kind: "Sandbox", name: "my-sandbox", uid: "9a2e", controller: true },
};

describe("claims table encoding", () => {
  test("a full row is written compactly in the seed's member order", () => {
    const text = encodeTable({ claims: [["default/my-sandbox", full]], releasing: [] });
    expect(text).toBe(
      '{"claims":{"default/my-sandbox":{"id":"sb_0123456789abcdef","token":"tok","address":"10.0.0.5:7777",' +
        '"podUID":"6f1c","authority":"9a2e","claimedAt":"2026-07-27T02:15:00Z","deadline":"2026-07-28T02:15:00Z",' +
        '"owner":{"apiVersion":"agents.x-k8s.io/v1beta1","kind":"Sandbox","name":"my-sandbox","uid":"9a2e","controller":true}}}}',
    );
  });

  test("empty members are omitted but podUID is always written, and an empty releasing list is left out", () => {
    const sparse: Claim = { id: "sb_1", token: "t", address: "", podUID: "", authority: "", claimedAt: 0, deadline: 0 };
    expect(encodeTable({ claims: [["a/b", sparse]], releasing: [] })).toBe('{"claims":{"a/b":{"id":"sb_1","token":"t","podUID":""}}}');
    expect(encodeTable({ claims: [], releasing: [] })).toBe('{"claims":{}}');
  });

  test("releasing entries have the claim shape", () => {
    const text = encodeTable({ claims: [], releasing: [{ ...full, owner: undefined }] });
    const parsed = JSON.parse(text);
    expect(parsed.releasing[0]).toEqual({
      id: full.id,
      token: "tok",
      address: full.address,
      podUID: "6f1c",
      authority: "9a2e",
      claimedAt: "2026-07-27T02:15:00Z",
      deadline: "2026-07-28T02:15:00Z",
    });
  });

  test("what is written parses with the file schema and decodes back to the same rows", () => {
    const text = encodeTable({ claims: [["default/my-sandbox", full]], releasing: [{ ...full, id: "sb_2" }] });
    expect(ClaimsFileSchema.safeParse(JSON.parse(text)).success).toBe(true);
    const back = decodeTable(text, "/x", T0 + 5000);
    expect(back.claims.get("default/my-sandbox")).toEqual(full);
    expect(back.releasing.map((c) => c.id)).toEqual(["sb_2"]);
    expect(back.claimedAtFilled).toBe(0);
  });

  test("times are whole seconds in UTC", () => {
    expect(formatRfc3339Seconds(T0 + 999)).toBe("2026-07-27T02:15:00Z");
    expect(parseGoTime("2026-07-27T04:15:00.123456789+02:00")).toBe(T0 + 123);
    expect(parseGoTime("0001-01-01T00:00:00Z")).toBeNull();
    expect(parseGoTime("yesterday")).toBeUndefined();
  });
});

describe("claims table loading", () => {
  test('"claims": null and a missing claims member are an empty table', () => {
    expect(decodeTable('{"claims":null}', "/x", T0).claims.size).toBe(0);
    expect(decodeTable("{}", "/x", T0).claims.size).toBe(0);
  });

  test("unknown members are ignored and an indented file is accepted", () => {
    const text = JSON.stringify({ version: 7, claims: { "a/b": { id: "sb_1", token: "t", podUID: "u", extra: 1 } } }, null, 2);
    const t = decodeTable(text, "/x", T0);
    expect(t.claims.get("a/b")?.id).toBe("sb_1");
  });

  test("an older row without claimedAt gets now, and without deadline or authority stays unknown", () => {
    const t = decodeTable('{"claims":{"a/b":{"id":"sb_1","token":"t","podUID":"u"}}}', "/x", T0 + 1500);
    expect(t.claims.get("a/b")).toEqual({ id: "sb_1", token: "t", address: "", podUID: "u", authority: "", claimedAt: T0 + 1000, deadline: 0 });
    expect(t.claimedAtFilled).toBe(1);
  });

  test("Go's zero time reads as an unknown deadline", () => {
    const t = decodeTable('{"claims":{"a/b":{"id":"sb_1","token":"t","podUID":"u","deadline":"0001-01-01T00:00:00Z"}}}', "/x", T0);
    expect(t.claims.get("a/b")?.deadline).toBe(0);
  });

  test("undecodable JSON is fatal and names the file", () => {
    expect(() => decodeTable('{"claims":', "/var/lib/vk-sandbox/claims.json", T0)).toThrow(ClaimsStateError);
    let thrown: unknown;
    try {
      decodeTable("{not json", "/var/lib/vk-sandbox/claims.json", T0);
    } catch (e) {
      thrown = e;
    }
    // Asserted outside the catch: a decode that does not throw must fail the test, not skip its checks.
    expect(thrown).toBeInstanceOf(ClaimsStateError);
    expect((thrown as ClaimsStateError).code).toBe("malformed");
    expect((thrown as Error).message).toContain("/var/lib/vk-sandbox/claims.json");
  });

  test("a member of the wrong type or an unparsable time is malformed, not silently dropped", () => {
    expect(() => decodeTable('{"claims":{"a/b":{"id":5}}}', "/x", T0)).toThrow(/malformed.*claims\.a\/b\.id/);
    expect(() => decodeTable('{"claims":{"a/b":{"id":"x","claimedAt":"soon"}}}', "/x", T0)).toThrow(/malformed/);
    expect(() => decodeTable('{"claims":[]}', "/x", T0)).toThrow(ClaimsStateError);
  });
});

describe("TableEncoder (the store's incremental encoder)", () => {
  const row = (id: string, token = "t"): Claim => ({ ...full, id, token });
  const text = (parts: Uint8Array[]) => Buffer.concat(parts).toString("utf8");

  test("its bytes are encodeTable's text, for an empty table and one row", () => {
    const enc = new TableEncoder();
    expect(text(enc.encode({ claims: [], releasing: [] }))).toBe(encodeTable({ claims: [], releasing: [] }));
    const one = { claims: [["a/b", row("sb_1")]] as const, releasing: [row("sb_r")] };
    expect(text(enc.encode(one))).toBe(encodeTable(one));
  });

  test("a write after one new row re-renders only the last run: the bytes of every earlier run are the same objects", () => {
    const enc = new TableEncoder();
    const rows: Array<readonly [string, Claim]> = Array.from({ length: 2000 }, (_, i) => [`ns/p${i}`, row(`sb_${i}`)] as const);
    const first = enc.encode({ claims: rows, releasing: [] });
    rows.push(["ns/new", row("sb_new")]);
    const second = enc.encode({ claims: rows, releasing: [] });
    expect(text(second)).toBe(encodeTable({ claims: rows, releasing: [] }));
    // 2000 rows at about one cut in 128 make several runs; all but the last (and the tail) are reused as they are.
    expect(first.length).toBeGreaterThan(5);
    expect(second.slice(1, first.length - 2)).toEqual(first.slice(1, first.length - 2));
    // (The first run is a fresh view that drops its leading comma; the runs after it are the cached bytes.)
    for (let i = 2; i < first.length - 2; i++) expect(second[i]).toBe(first[i]!);
  });

  // Any sequence of the changes the provider makes (a claim added, a row replaced, a row removed, a tentative row
  // held back, the releasing list changed) yields encodeTable's text at every write.
  test("matches encodeTable after every step of a random history", () => {
    type Op = { kind: "add" | "replace" | "drop" | "hold" | "release"; n: number };
    const op = fc.record({ kind: fc.constantFrom("add", "add", "add", "replace", "drop", "hold", "release"), n: fc.nat(10_000) }) as fc.Arbitrary<Op>;
    fc.assert(
      fc.property(fc.array(op, { minLength: 1, maxLength: 120 }), fc.nat(400), (ops, start) => {
        const enc = new TableEncoder();
        const table = new Map<string, Claim>();
        let seq = 0;
        for (let i = 0; i < start; i++) table.set(`ns/s${i}`, row(`sb_s${i}`));
        let held: string | undefined;
        let releasing: Claim[] = [];
        for (const o of ops) {
          const keys = [...table.keys()];
          const pick = keys.length > 0 ? keys[o.n % keys.length]! : undefined;
          if (o.kind === "add") table.set(`ns/n${seq}`, row(`sb_n${seq++}`));
          else if (o.kind === "replace" && pick) table.set(pick, row(table.get(pick)!.id, `t${seq++}`));
          else if (o.kind === "drop" && pick) table.delete(pick);
          else if (o.kind === "hold") held = pick;
          else if (o.kind === "release") releasing = o.n % 2 === 0 ? [] : [row(`sb_r${seq++}`)];
          const snapshot = { claims: [...table].filter(([k]) => k !== held), releasing };
          if (text(enc.encode(snapshot)) !== encodeTable(snapshot)) return false;
        }
        return true;
      }),
      { numRuns: 150 },
    );
  });
});
