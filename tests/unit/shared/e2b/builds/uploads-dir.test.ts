// The directory store's signed PUT (docs/e2b.md §6.3): signature and expiry, the byte bound while streaming, temp
// name then rename, 0750 directories.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createHmac } from "node:crypto";
import { FakeClock } from "#shared/clock/index.ts";
import { DirUploadStore, createUploadStore, uploadSignature } from "#shared/e2b/uploads/index.ts";

const root = mkdtempSync(join(tmpdir(), "e2b-dir-store-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const HASH = "b".repeat(64);

function stream(chunks: Uint8Array[]): ReadableStream<Uint8Array> {
  let i = 0;
  return new ReadableStream({ pull: (c) => (i < chunks.length ? c.enqueue(chunks[i++]!) : c.close()) });
}

describe("DirUploadStore", () => {
  test("the signature is hex HMAC-SHA256 over the spec's message", () => {
    const want = createHmac("sha256", "s3cret").update(["e2b-upload", "ns", "app", HASH, "100"].join("\u0000")).digest("hex");
    expect(uploadSignature("s3cret", "ns", "app", HASH, 100)).toBe(want);
  });

  test("locate hands out a signed link that verifies; altered or expired ones do not", async () => {
    const clock = new FakeClock();
    const store = new DirUploadStore(join(root, "a"), "secret", 1024, clock);
    const r = await store.locate("ns", "app", HASH, { baseUrl: "http://h:1" });
    expect(r.present).toBe(false);
    if (r.present) return;
    const u = new URL(r.url);
    expect(u.pathname).toBe(`/templates/app/files/${HASH}`);
    const q = (k: string) => u.searchParams.get(k)!;
    expect(store.verify(q("ns"), "app", HASH, q("expires"), q("sig"))).toBeUndefined();
    expect(store.verify("other", "app", HASH, q("expires"), q("sig"))).toBe("invalid upload signature");
    expect(store.verify(q("ns"), "app2", HASH, q("expires"), q("sig"))).toBe("invalid upload signature");
    expect(store.verify(q("ns"), "app", HASH, String(Number(q("expires")) + 1), q("sig"))).toBe("invalid upload signature");
    clock.advance(3601_000);
    expect(store.verify(q("ns"), "app", HASH, q("expires"), q("sig"))).toBe("upload link expired");
  });

  test("a body over the bound is refused while streaming and leaves no file or empty folder; a valid one is renamed into place", async () => {
    const dir = join(root, "b");
    const store = createUploadStore({ dir, uploadMax: 10 }, { envdSecret: "secret" }) as DirUploadStore;
    expect((statSync(dir).mode & 0o777).toString(8)).toBe("750");
    // Declared too large: refused before reading.
    expect((await store.write("ns", "app", HASH, 11, stream([]))).status).toBe(413);
    // Undeclared, and more than the bound arrives: refused at the chunk that crosses it.
    let pulled = 0;
    const endless = new ReadableStream<Uint8Array>({ pull: (c) => void (pulled++, c.enqueue(new Uint8Array(4))) });
    expect((await store.write("ns", "app", HASH, undefined, endless)).status).toBe(413);
    expect(pulled).toBeLessThan(6);
    // No temp file, and no folder left empty by the failed first PUT of the template (nor its namespace's).
    expect(readdirSync(dir)).toEqual([]);
    expect(await store.open("ns", "app", HASH)).toBeUndefined();
    expect((await store.write("ns", "app", HASH, 10, stream([Buffer.from("01234"), Buffer.from("56789")]))).status).toBe(200);
    expect(readFileSync(join(dir, "ns", "app", `${HASH}.tar`), "utf8")).toBe("0123456789");
    expect(readdirSync(join(dir, "ns", "app"))).toEqual([`${HASH}.tar`]);
    expect((statSync(join(dir, "ns")).mode & 0o777).toString(8)).toBe("750");
    expect(await store.locate("ns", "app", HASH, { baseUrl: "http://h" })).toEqual({ present: true });
    const opened = await store.open("ns", "app", HASH);
    expect(opened!.size).toBe(10);
    expect(await new Response(opened!.body).text()).toBe("0123456789");
  });

  test("startup refusals name the flag", () => {
    expect(() => createUploadStore({ dir: "/proc/nope/x", uploadMax: 1 }, { envdSecret: "s" })).toThrow(/--e2b-build-dir/);
    expect(() => createUploadStore({ dir: join(root, "c"), uploadMax: 1, s3: { bucket: "b", forcePathStyle: false } }, { envdSecret: "s" })).toThrow(/exclusive/);
    expect(createUploadStore({ uploadMax: 1 }, { envdSecret: "s" })).toBeUndefined();
  });
});
