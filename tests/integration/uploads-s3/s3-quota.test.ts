// The S3 store's per-namespace bounds (issue 27 item 3; shared/e2b/uploads/s3-quota.ts) against a real
// S3-compatible server (versitygw, posix backend): upload links a namespace has not used are bounded (a repeated
// request for the same archive shares its link, an upload frees it, another namespace is untouched); archives are
// counted from the namespace's listing, recent ones refuse a new link with 429 while old ones make room; and an
// object larger than upload-max that a presigned PUT stored anyway (its length cannot be signed) is deleted by the
// next listing instead of holding the namespace's space.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { existsSync, utimesSync } from "node:fs";
import { join } from "node:path";
import { createS3UploadStore } from "#shared/e2b/uploads/s3.ts";
import { EVICT_MIN_AGE_MS } from "#shared/e2b/uploads/dir-quota.ts";
import { startS3Server, type S3Server } from "#tests/support/s3/server.ts";
import { caught, withAwsEnv } from "./env.ts";

let s3: S3Server;
beforeAll(async () => {
  s3 = await startS3Server();
});
afterAll(() => s3?.stop());

const HASH = (n: number) => createHash("sha256").update(`quota-${n}`).digest("hex");
const origin = { baseUrl: "http://e2b.example.test" };
const rootKeys = () => ({ AWS_ACCESS_KEY_ID: s3.accessKeyId, AWS_SECRET_ACCESS_KEY: s3.secretAccessKey });
const store = (o: { prefix: string; uploadMax?: number; nsArchives?: number; nsLinks?: number; nsBytes?: number }) =>
  createS3UploadStore({ bucket: s3.bucket, endpoint: s3.endpoint, region: s3.region, forcePathStyle: true, uploadMax: 100, ...o });
const file = (prefix: string, ns: string, tpl: string, hash: string) => join(s3.root, s3.bucket, prefix, "e2b-files", ns, tpl, `${hash}.tar`);

async function upload(link: { present: boolean; url?: string; headers?: Record<string, string> }, body: string | Blob): Promise<void> {
  if (link.present || !link.url) throw new Error("expected an upload link");
  const r = await fetch(link.url, { method: "PUT", body, headers: link.headers ?? {} });
  await r.body?.cancel();
  if (r.status !== 200) throw new Error(`PUT answered ${r.status}`);
}

describe("S3 upload store: per-namespace bounds against versitygw", () => {
  test("unused links are bounded per namespace; the same archive shares its link; an upload frees it; other namespaces are untouched", async () => {
    await withAwsEnv(rootKeys(), async () => {
      const s = store({ prefix: "links", nsLinks: 2 });
      const one = await s.locate("team-a", "app", HASH(1), origin);
      await s.locate("team-a", "app", HASH(2), origin);
      // Asked again (a retried build): the same reservation, not a third.
      expect((await s.locate("team-a", "app", HASH(1), origin)).present).toBe(false);
      const third = await caught(s.locate("team-a", "app", HASH(3), origin));
      expect(third.status).toBe(429);
      expect(third.headers).toEqual({ "retry-after": "5" });
      expect(third.message).toBe("upload store: namespace team-a has 2 upload links not used yet (at most 2); upload with them or retry when they expire");
      expect((await s.locate("team-b", "app", HASH(3), origin)).present).toBe(false);
      // Used: the next request for it finds it present, and its link no longer counts.
      await upload(one, "archive one");
      expect(await s.locate("team-a", "app", HASH(1), origin)).toEqual({ present: true });
      expect((await s.locate("team-a", "app", HASH(3), origin)).present).toBe(false);
    });
  });

  test("archives count from the listing: recent ones refuse a link, the namespace's own old ones make room", async () => {
    await withAwsEnv(rootKeys(), async () => {
      const prefix = "count";
      const writer = store({ prefix, nsArchives: 2, nsLinks: 4 });
      for (const n of [1, 2]) await upload(await writer.locate("team-a", "app", HASH(n), origin), `archive ${n}`);
      await upload(await writer.locate("team-b", "app", HASH(1), origin), "b's archive");
      // A fresh replica lists the namespace: 2 archives, and a link would be a third.
      const refused = await caught(store({ prefix, nsArchives: 2, nsLinks: 4 }).locate("team-a", "app", HASH(3), origin));
      expect(refused.status).toBe(429);
      // 18 bytes stored ("archive 1", "archive 2"); 1600 = 16 x upload-max (100).
      expect(refused.message).toBe(
        "upload store: namespace team-a holds 18 bytes in 2 uploaded archives and unused links (at most 1600 bytes and 2 archives; a link reserves 100); archives older than 10 min make room, retry later",
      );
      // The oldest archive aged past the eviction floor (versitygw reports the file's mtime as LastModified).
      const old = new Date(Date.now() - EVICT_MIN_AGE_MS - 60_000);
      utimesSync(file(prefix, "team-a", "app", HASH(1)), old, old);
      utimesSync(file(prefix, "team-b", "app", HASH(1)), old, old);
      expect((await store({ prefix, nsArchives: 2, nsLinks: 4 }).locate("team-a", "app", HASH(3), origin)).present).toBe(false);
      expect(existsSync(file(prefix, "team-a", "app", HASH(1)))).toBe(false);
      expect(existsSync(file(prefix, "team-a", "app", HASH(2)))).toBe(true);
      expect(existsSync(file(prefix, "team-b", "app", HASH(1)))).toBe(true);
    });
  });

  test("an object over upload-max that a presigned PUT stored anyway is deleted by the next listing, and does not count", async () => {
    await withAwsEnv(rootKeys(), async () => {
      const prefix = "oversize";
      const s = store({ prefix, uploadMax: 10, nsArchives: 1 });
      // The link signs no length: S3 takes 100 bytes for a store whose bound is 10.
      await upload(await s.locate("team-a", "app", HASH(1), origin), new Blob([new Uint8Array(100)]));
      expect(existsSync(file(prefix, "team-a", "app", HASH(1)))).toBe(true);
      // The next listing (a replica, or this one once its listing is older than 10 s) removes it, and with the
      // namespace's only archive slot free again, the link is handed out.
      expect((await store({ prefix, uploadMax: 10, nsArchives: 1 }).locate("team-a", "app", HASH(2), origin)).present).toBe(false);
      expect(existsSync(file(prefix, "team-a", "app", HASH(1)))).toBe(false);
    });
  });
});
