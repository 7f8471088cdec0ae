// The S3 store's bounds for builds (attacker review M4, L1) against a real S3-compatible server (versitygw): a
// presigned PUT cannot bound its size, so open() refuses an archive larger than --e2b-build-upload-max from the
// response head (413, nothing read), and builds' GETs have their own in-flight allowance: link requests at their
// cap never refuse a build's read.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { createHash, randomBytes } from "node:crypto";
import { createS3UploadStore } from "#shared/e2b/uploads/s3.ts";
import { startS3Server, type S3Server } from "#tests/support/s3/server.ts";
import { caught, withAwsEnv } from "../uploads-s3/env.ts";

let s3: S3Server;
beforeAll(async () => {
  s3 = await startS3Server();
}, 60_000);
afterAll(() => s3?.stop());

const HASH = (n: number) => createHash("sha256").update(`bounds-${n}`).digest("hex");
const keys = () => ({ AWS_ACCESS_KEY_ID: s3.accessKeyId, AWS_SECRET_ACCESS_KEY: s3.secretAccessKey });

test("open() refuses an archive over uploadMax (413 naming the flag); one at the bound opens", async () => {
  await withAwsEnv(keys(), async () => {
    const s = createS3UploadStore({ bucket: s3.bucket, endpoint: s3.endpoint, region: s3.region, forcePathStyle: true, uploadMax: 1000 });
    for (const [n, size] of [[1, 1001], [2, 1000]] as const) {
      const link = await s.locate("team-a", "app", HASH(n), { baseUrl: "http://x" });
      if (link.present) throw new Error("unexpectedly present");
      // S3 takes the larger one: the presigned PUT has no size condition.
      const put = await fetch(link.url, { method: "PUT", body: randomBytes(size) });
      expect(put.status).toBe(200);
      await put.body?.cancel();
    }
    const refused = await caught(s.open("team-a", "app", HASH(1)));
    expect([refused.status, refused.message]).toEqual([413, "the uploaded archive is 1001 bytes, larger than --e2b-build-upload-max (1000)"]);
    const ok = await s.open("team-a", "app", HASH(2));
    expect(ok?.size).toBe(1000);
    expect((await new Response(ok!.body).arrayBuffer()).byteLength).toBe(1000);
  });
}, 60_000);

test("link requests at their in-flight cap do not refuse a build's GET", async () => {
  const silent = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  try {
    await withAwsEnv(keys(), async () => {
      const s = createS3UploadStore({ bucket: "b-x", endpoint: `http://127.0.0.1:${silent.port}`, forcePathStyle: true, callTimeoutMs: 600, maxInFlight: 1, maxGetsInFlight: 1 });
      const held = caught(s.locate("team-a", "t", HASH(3), { baseUrl: "http://x" }));
      expect((await caught(s.locate("team-a", "t", HASH(4), { baseUrl: "http://x" }))).message).toContain("1 S3 calls already in flight");
      // The GET waits for S3 (and times out) instead of being refused.
      const get = caught(s.open("team-a", "t", HASH(5)));
      expect((await caught(s.open("team-a", "t", HASH(6)))).message).toBe("upload store: GET in bucket b-x: 1 S3 calls already in flight; retry");
      expect((await get).message).toContain("did not answer within 600 ms");
      await held;
    });
  } finally {
    silent.stop(true);
  }
}, 30_000);
