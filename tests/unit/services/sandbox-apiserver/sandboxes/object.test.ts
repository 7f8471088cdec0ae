import { describe, expect, test } from "bun:test";
import { fnv1a64, hostOf, sandboxFromEntry, splitEntryName } from "#services/sandbox-apiserver/sandboxes/object.ts";

function fnvReference(s: string): string {
  let h = 0xcbf29ce484222325n;
  for (const b of new TextEncoder().encode(s)) {
    h ^= BigInt(b);
    h = (h * 0x100000001b3n) & 0xffffffffffffffffn;
  }
  return h.toString();
}

describe("the read-path object", () => {
  test("FNV-1a 64 equals the BigInt reference on ASCII, UTF-8 and long inputs", () => {
    for (const s of ["", "a", "default/x|sb_1|Running||10.0.0.5:7777|img|2026-01-01T00:00:00Z|1767225600", "ünïcødé ✓ 日本 😀", "lone \ud800 surrogate", "x".repeat(5000)]) {
      expect(fnv1a64(s)).toBe(fnvReference(s));
    }
    expect(fnv1a64("a")).toBe("12638187200555641996"); // published FNV-1a 64 test vector for "a" (0xaf63dc4c8601ec8c)
  });

  test("entry names split at the first slash; none means namespace default", () => {
    expect(splitEntryName("demo")).toEqual({ namespace: "default", name: "demo" });
    expect(splitEntryName("a/b/c")).toEqual({ namespace: "a", name: "b/c" });
  });

  test("podIPs take the host of addr; a value that is not host:port stays raw", () => {
    expect(hostOf("10.0.0.5:7777")).toBe("10.0.0.5");
    expect(hostOf("http://10.0.0.5:7777")).toBe("10.0.0.5");
    expect(hostOf("[fd00::1]:80")).toBe("fd00::1");
    expect(hostOf("just-a-host")).toBe("just-a-host");
  });

  test("equal content gives equal resourceVersion; a changed deadline changes it", () => {
    const e = { name: "a/x", id: "sb_1", phase: "Running" as const, deadline: "2026-01-01T00:00:00Z" };
    expect(sandboxFromEntry(e, "n1").metadata.resourceVersion).toBe(sandboxFromEntry({ ...e }, "n1").metadata.resourceVersion);
    expect(sandboxFromEntry({ ...e, deadline: "2026-01-01T00:00:01Z" }, "n1").metadata.resourceVersion).not.toBe(sandboxFromEntry(e, "n1").metadata.resourceVersion);
  });

  test("no annotations at all when the node reported none; Ready False with reason Unknown-free phase for Hibernated", () => {
    const s = sandboxFromEntry({ name: "x", phase: "Hibernated" }, "n1");
    expect(s.metadata.annotations).toBeUndefined();
    expect(s.metadata.creationTimestamp).toBeUndefined();
    expect(s.status.conditions![0]).toMatchObject({ status: "False", reason: "Hibernated" });
    expect(s.status.podIPs).toBeUndefined();
  });
});
