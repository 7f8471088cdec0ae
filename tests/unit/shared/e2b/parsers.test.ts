// Pure parts of the e2b surface: id forms, key and alias files, list filters and paging.
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { claimIdOf, publicSandboxId, sameSandboxId } from "#shared/e2b/ids.ts";
import { parseAliasFile } from "#shared/e2b/files.ts";
import { parseKeyFile } from "#shared/e2b/keys.ts";
import { decodePageToken, encodePageToken, page, parseMetadataFilter, parsePaging } from "#shared/e2b/list.ts";
import { E2bError } from "#shared/e2b/errors.ts";
import type { ListedSandbox } from "#shared/e2b/schemas.ts";

describe("ids", () => {
  test("public id: lowercase, [a-z0-9-] only; either spelling maps back to the claim id", () => {
    expect(publicSandboxId("sb_0123abcd")).toBe("sb-0123abcd");
    expect(claimIdOf("sb-0123ABCD")).toBe("sb_0123abcd");
    expect(claimIdOf("sb_0123abcd")).toBe("sb_0123abcd");
    fc.assert(
      fc.property(fc.stringMatching(/^[0-9a-f]{16}$/), (hex) => {
        const claim = `sb_${hex}`;
        expect(sameSandboxId(publicSandboxId(claim), claim)).toBe(true);
        expect(sameSandboxId(claim, claim)).toBe(true);
        expect(claimIdOf(publicSandboxId(claim))).toBe(claim);
        expect(publicSandboxId(claim)).toMatch(/^[a-z0-9-]+$/);
      }),
    );
  });
});

describe("files", () => {
  test("key file: comments, blanks, key or key+namespace, later lines win; three fields is an error", () => {
    const { keys } = parseKeyFile("# c\n\nk1\nk2 team\n  k1   other  \n", "default");
    expect([...keys]).toEqual([
      ["k1", "other"],
      ["k2", "team"],
    ]);
    expect(() => parseKeyFile("a b c", "d")).toThrow("malformed entry on line 1");
  });
  test("key file namespaces are DNS-1123 labels: empty, slashed, upper-case or too long fail naming the file and line", () => {
    for (const bad of ["team/x", "Team", "-a", "a".repeat(64), "a_b"]) {
      expect(() => parseKeyFile(`k1 ok\nk2 ${bad}\n`, "default", "/etc/keys")).toThrow(`on line 2 of /etc/keys`);
    }
    // The default namespace is checked too (a programmatic caller could pass ""): a key naming none lands there.
    expect(() => parseKeyFile("k1\n", "", "/etc/keys")).toThrow('namespace "" must not be empty on line 1 of /etc/keys');
  });
  test("key file quota fields: per namespace, 0 = no limit, conflicting values or junk fail with the line", () => {
    const f = parseKeyFile("k1 team max-sandboxes=3 creates-per-second=0.5\nk2 team max-sandboxes=3 creates-per-second=0.5\nk3 other\nk4 max-sandboxes=0\n", "default");
    expect(f.keys.get("k4")).toBe("default");
    expect([...f.quotas]).toEqual([
      ["team", { maxSandboxes: 3, createsPerSecond: 0.5 }],
      ["default", { maxSandboxes: 0 }],
    ]);
    expect(() => parseKeyFile("k1 team max-sandboxes=3\nk2 team max-sandboxes=4\n", "d")).toThrow('namespace "team" has other quota values on line 1');
    expect(() => parseKeyFile("k1 team max-sandboxes=-1\n", "d")).toThrow("max-sandboxes must be a whole number >= 0 on line 1");
    expect(() => parseKeyFile("k1 team creates-per-second=x\n", "d")).toThrow("creates-per-second must be a number >= 0 on line 1");
    expect(() => parseKeyFile("k1 team burst=3\n", "d")).toThrow("malformed entry");
  });
  test("alias file: size defaults to small; bad size, duplicates and field counts are errors", () => {
    expect([...parseAliasFile("base img\nci img2 medium\n")]).toEqual([
      ["base", { image: "img", size: "small" }],
      ["ci", { image: "img2", size: "medium" }],
    ]);
    expect(() => parseAliasFile("base img huge")).toThrow('unknown size "huge"');
    expect(() => parseAliasFile("base img\nbase img2")).toThrow('duplicate alias "base"');
    expect(() => parseAliasFile("lonely")).toThrow("malformed entry");
    expect(() => parseAliasFile("a b c d")).toThrow("malformed entry");
  });
});

describe("list filters and paging", () => {
  test("the SDK's metadata encoding round-trips (encodeURIComponent each side, then form-encoded)", () => {
    fc.assert(
      fc.property(fc.dictionary(fc.string({ minLength: 1, maxLength: 12 }), fc.string({ maxLength: 12 }), { maxKeys: 5 }), (m) => {
        const sdk = new URLSearchParams(Object.fromEntries(Object.entries(m).map(([k, v]) => [encodeURIComponent(k), encodeURIComponent(v)]))).toString();
        expect(parseMetadataFilter(sdk)).toEqual(m);
      }),
    );
  });
  test("keys that name Object.prototype members are ordinary keys (found by the property above)", () => {
    const m = parseMetadataFilter("__proto__=x&constructor=y&toString=z");
    expect(Object.keys(m)).toEqual(["__proto__", "constructor", "toString"]);
    expect(Object.getPrototypeOf(m)).toBe(Object.prototype);
    expect(m["constructor"] as unknown).toBe("y");
  });
  test("metadata filter errors are 400s, never throws of another kind", () => {
    for (const bad of ["novalue", "=v", "a=1&a=2", "%E0%A4%A=1"]) {
      const err = (() => {
        try {
          parseMetadataFilter(bad);
        } catch (e) {
          return e;
        }
      })();
      expect(err).toBeInstanceOf(E2bError);
      expect((err as E2bError).status).toBe(400);
    }
    fc.assert(
      fc.property(fc.string({ maxLength: 40 }), (raw) => {
        try {
          parseMetadataFilter(raw);
        } catch (e) {
          expect(e).toBeInstanceOf(E2bError);
        }
      }),
      { numRuns: 2000 },
    );
  });
  test("paging parameters: limit 1-100, order asc/desc, tokens round-trip; anything else is a 400", () => {
    expect(parsePaging({})).toEqual({ limit: 100, order: "desc", after: undefined });
    const tok = encodePageToken({ startedAt: "2026-01-01T00:00:00Z", sandboxID: "sb-1" });
    expect(decodePageToken(tok)).toEqual({ startedAt: "2026-01-01T00:00:00Z", sandboxID: "sb-1" });
    fc.assert(
      fc.property(fc.record({ limit: fc.option(fc.string({ maxLength: 5 }), { nil: undefined }), order: fc.option(fc.string({ maxLength: 6 }), { nil: undefined }), nextToken: fc.option(fc.string({ maxLength: 30 }), { nil: undefined }) }), (q) => {
        try {
          const p = parsePaging(q);
          expect(p.limit).toBeGreaterThanOrEqual(1);
          expect(p.limit).toBeLessThanOrEqual(100);
        } catch (e) {
          expect((e as E2bError).status).toBe(400);
        }
      }),
      { numRuns: 2000 },
    );
  });
  test("pages of any size cover every item exactly once, in order, and the last page carries no token", () => {
    const item = (i: number, t: number): ListedSandbox => ({
      templateID: "img",
      sandboxID: `sb-${String(i).padStart(4, "0")}`,
      clientID: "c",
      startedAt: new Date(t * 1000).toISOString().replace(/\.000Z$/, "Z"),
      endAt: "2030-01-01T00:00:00Z",
      state: "running",
      envdVersion: "0.8.0",
      cpuCount: 1,
      memoryMB: 512,
      diskSizeMB: 0,
      domain: "d",
    });
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 1_700_000_000, max: 1_700_000_100 }), { maxLength: 30 }), fc.integer({ min: 1, max: 7 }), fc.constantFrom("asc" as const, "desc" as const), (times, limit, order) => {
        const items = times.map((t, i) => item(i, t));
        const seen: string[] = [];
        let after: { startedAt: string; sandboxID: string } | undefined;
        for (let guard = 0; guard < 100; guard++) {
          const r = page(items, { limit, order, after });
          seen.push(...r.items.map((x) => x.sandboxID));
          if (!r.nextToken) break;
          after = decodePageToken(r.nextToken);
        }
        expect([...seen].sort()).toEqual(items.map((x) => x.sandboxID).sort());
      }),
    );
  });
});
