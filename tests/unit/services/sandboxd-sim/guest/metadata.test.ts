// File metadata from upload headers, with envd's rules, and its bookkeeping across moves and removals.
import { describe, expect, test } from "bun:test";
import { FileMetadata, MetadataError, metadataFromHeaders } from "#services/sandboxd-sim/guest/metadata.ts";

describe("metadataFromHeaders", () => {
  test("the X-Metadata- prefix is stripped and the key lowercased; other headers are ignored", () => {
    const h = new Headers({ "X-Metadata-Owner": "alice", "x-metadata-Build-ID": "42", "content-type": "text/plain" });
    expect(metadataFromHeaders(h)).toEqual({ owner: "alice", "build-id": "42" });
  });

  test("a non-printable value, an over-long key or too much in total is refused naming why", () => {
    expect(() => metadataFromHeaders(new Headers({ "x-metadata-k": "tab\there" }))).toThrow(MetadataError);
    expect(() => metadataFromHeaders(new Headers({ [`x-metadata-${"k".repeat(247)}`]: "v" }))).toThrow("longer than 246 bytes");
    const many = new Headers();
    for (let i = 0; i < 20; i++) many.set(`x-metadata-key${i}`, "v".repeat(200));
    expect(() => metadataFromHeaders(many)).toThrow("more than 4096");
  });

  test("exactly at the budget is accepted (9-byte xattr prefix counted per key)", () => {
    const key = "k";
    const value = "v".repeat(4096 - 9 - key.length);
    expect(metadataFromHeaders(new Headers({ [`x-metadata-${key}`]: value }))).toEqual({ k: value });
  });
});

describe("FileMetadata", () => {
  test("set replaces, an empty set clears; move carries a directory's files; remove drops them", () => {
    const m = new FileMetadata();
    m.set("/home/user/d/a", { x: "1" });
    m.set("/home/user/d/sub/b", { y: "2" });
    m.set("/home/user/dd", { z: "3" });
    m.move("/home/user/d", "/home/user/e");
    expect(m.get("/home/user/e/a")).toEqual({ x: "1" });
    expect(m.get("/home/user/e/sub/b")).toEqual({ y: "2" });
    expect(m.get("/home/user/dd")).toEqual({ z: "3" }); // a sibling with the same prefix is not moved
    m.set("/home/user/e/a", {});
    expect(m.get("/home/user/e/a")).toBeUndefined();
    m.remove("/home/user/e");
    expect(m.get("/home/user/e/sub/b")).toBeUndefined();
    expect(m.get("/home/user/dd")).toEqual({ z: "3" });
  });
});
