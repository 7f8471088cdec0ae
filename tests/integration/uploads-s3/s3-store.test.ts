// The S3 upload store (shared/e2b/uploads/s3.ts) against a real S3-compatible server (versitygw, posix backend):
// an absent archive gets a presigned PUT that a plain fetch can use, the server then reports it present, open()
// streams the same bytes back, keys sit where e2b.md §6.3 puts them, and a URL whose key was changed is refused by
// the server (it really is signed). Failures (wrong endpoint, a store that never answers, a stalled body) are
// bounded, clear 502/503s, never a crash.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHash, randomBytes } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { createS3UploadStore, createS3UploadStoreFromFlags, PRESIGN_SECONDS } from "#shared/e2b/uploads/s3.ts";
import { parseApiserverFlags } from "#services/sandbox-apiserver/flags.ts";
import { StartupError } from "#shared/config/index.ts";
import { startS3Server, type S3Server } from "#tests/support/s3/server.ts";
import { freePorts } from "#tests/kube/ports.ts";
import { caught, withAwsEnv } from "./env.ts";

let s3: S3Server;
beforeAll(async () => {
  s3 = await startS3Server();
});
afterAll(() => s3?.stop());

const HASH = (n: number) => createHash("sha256").update(`archive-${n}`).digest("hex");
const origin = { baseUrl: "http://e2b.example.test" };
const rootKeys = () => ({ AWS_ACCESS_KEY_ID: s3.accessKeyId, AWS_SECRET_ACCESS_KEY: s3.secretAccessKey });
const store = (extra: Partial<Parameters<typeof createS3UploadStore>[0]> = {}) =>
  createS3UploadStore({ bucket: s3.bucket, prefix: "tenant-builds", endpoint: s3.endpoint, region: s3.region, forcePathStyle: true, ...extra });

describe("S3 upload store against versitygw", () => {
  test("an absent archive gets a path-style presigned PUT for one hour; a plain fetch with its headers stores it; then it is present", async () => {
    await withAwsEnv(rootKeys(), async () => {
      const s = store();
      const hash = HASH(1);
      const first = await s.locate("team-a", "py-app", hash, origin);
      if (first.present) throw new Error("a fresh bucket cannot hold the archive");
      const url = new URL(first.url);
      // Path-style on the custom endpoint, the key as e2b.md §6.3 writes it.
      expect(`${url.protocol}//${url.host}`).toBe(s3.endpoint);
      expect(url.pathname).toBe(`/${s3.bucket}/tenant-builds/e2b-files/team-a/py-app/${hash}.tar`);
      expect(url.searchParams.get("X-Amz-Expires")).toBe(String(PRESIGN_SECONDS));
      expect(url.searchParams.get("X-Amz-Algorithm")).toBe("AWS4-HMAC-SHA256");
      // Only Host is signed, so the SDK has no header to repeat and the response carries none.
      expect(url.searchParams.get("X-Amz-SignedHeaders")).toBe("host");
      expect(first.headers).toBeUndefined();
      // The secret never travels in the URL; the access key id does (that is how SigV4 names the signer).
      expect(first.url).not.toContain(s3.secretAccessKey);

      const body = randomBytes(200_000);
      const put = await fetch(first.url, { method: "PUT", body, headers: { ...first.headers, "content-length": String(body.length) } });
      expect(put.status).toBe(200);
      await put.body?.cancel();
      // The object is the posix backend's file at exactly that key.
      const file = join(s3.root, s3.bucket, "tenant-builds", "e2b-files", "team-a", "py-app", `${hash}.tar`);
      expect(existsSync(file)).toBe(true);
      expect(Buffer.compare(readFileSync(file), body)).toBe(0);

      expect(await s.locate("team-a", "py-app", hash, origin)).toEqual({ present: true });
      // Another namespace with the same template name and hash does not see it.
      expect((await s.locate("team-b", "py-app", hash, origin)).present).toBe(false);
    });
  });

  test("open streams the stored bytes back with their size; an absent archive opens as undefined", async () => {
    await withAwsEnv(rootKeys(), async () => {
      const s = store();
      const hash = HASH(2);
      const link = await s.locate("team-a", "big", hash, origin);
      if (link.present) throw new Error("unexpectedly present");
      const body = randomBytes(3 * 1024 * 1024 + 17);
      const put = await fetch(link.url, { method: "PUT", body });
      expect(put.status).toBe(200);
      await put.body?.cancel();

      const opened = await s.open("team-a", "big", hash);
      if (!opened) throw new Error("open found nothing");
      expect(opened.size).toBe(body.length);
      const back = Buffer.from(await new Response(opened.body).arrayBuffer());
      expect(createHash("sha256").update(back).digest("hex")).toBe(createHash("sha256").update(body).digest("hex"));

      expect(await s.open("team-a", "big", HASH(999))).toBeUndefined();
    });
  });

  test("a presigned URL is bound to its key: the same signature on another key is refused by the server", async () => {
    await withAwsEnv(rootKeys(), async () => {
      const link = await store().locate("team-a", "py-app", HASH(3), origin);
      if (link.present) throw new Error("unexpectedly present");
      const forged = link.url.replace(HASH(3), HASH(4));
      const r = await fetch(forged, { method: "PUT", body: "x" });
      expect(r.status).toBe(403);
      await r.body?.cancel();
      expect((await store().locate("team-a", "py-app", HASH(4), origin)).present).toBe(false);
    });
  });

  test("without forcePathStyle the bucket moves into the host name (virtual-hosted style)", async () => {
    await withAwsEnv(rootKeys(), async () => {
      const s = createS3UploadStore({ bucket: s3.bucket, endpoint: "https://s3.storage.example.com", region: "eu-west-1", forcePathStyle: false });
      // The presign alone (no HEAD first): that host does not exist, and the URL's shape is what this checks.
      const url = new URL((await s.presign("team-a", "tpl", HASH(5))).url);
      expect(url.host).toBe(`${s3.bucket}.s3.storage.example.com`);
      expect(url.pathname).toBe(`/e2b-files/team-a/tpl/${HASH(5)}.tar`);
      expect(url.searchParams.get("X-Amz-Credential")).toContain("/eu-west-1/s3/aws4_request");
    });
  });

  test("namespace, template or hash that could leave the prefix is a 400 before any S3 call", async () => {
    const s = store();
    for (const [ns, tpl, hash] of [["..", "t", HASH(6)], ["ns", "a/b", HASH(6)], ["ns", "t", "../x"], ["ns", "t", HASH(6).toUpperCase()], ["", "t", HASH(6)]] as const) {
      const err = await caught(s.locate(ns, tpl, hash, origin));
      expect(err.status).toBe(400);
    }
  });
});

describe("the store from sandbox-apiserver's flags", () => {
  const s3Flags = (args: string[]) => {
    const outcome = parseApiserverFlags(["--e2b-builds", ...args], {});
    if (outcome.kind !== "run") throw new Error(`flags parsed ${outcome.kind}`);
    const { bucket, ...rest } = outcome.config.e2b.builds.s3;
    if (bucket === undefined) throw new Error("no bucket flag");
    return { bucket, ...rest };
  };

  test("--e2b-build-store-s3-{bucket,prefix,endpoint,region,force-path-style} make a store the server accepts", async () => {
    await withAwsEnv(rootKeys(), async () => {
      const s = createS3UploadStoreFromFlags(
        s3Flags([`--e2b-build-store-s3-bucket=${s3.bucket}`, "--e2b-build-store-s3-prefix=flags/", `--e2b-build-store-s3-endpoint=${s3.endpoint}`, "--e2b-build-store-s3-region=us-east-1", "--e2b-build-store-s3-force-path-style"]),
      );
      const link = await s.locate("team-a", "flags-app", HASH(11), origin);
      if (link.present) throw new Error("unexpectedly present");
      expect(new URL(link.url).pathname).toBe(`/${s3.bucket}/flags/e2b-files/team-a/flags-app/${HASH(11)}.tar`);
      const put = await fetch(link.url, { method: "PUT", body: "x" });
      expect(put.status).toBe(200);
      await put.body?.cancel();
    });
  });

  test("an endpoint that is no http(s) URL is a startup error naming --e2b-build-store-s3-endpoint", () => {
    let err: unknown;
    try {
      createS3UploadStoreFromFlags(s3Flags([`--e2b-build-store-s3-bucket=${s3.bucket}`, "--e2b-build-store-s3-endpoint=s3.example.com"]));
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(StartupError);
    expect((err as StartupError).message).toStartWith("e2b: --e2b-build-store-s3-endpoint: ");
    expect((err as StartupError).context).toEqual({ flag: "--e2b-build-store-s3-endpoint" });
  });
});

describe("S3 upload store failures are bounded and clear", () => {
  test("an endpoint nobody listens on: 503 'S3 is unreachable', not a crash", async () => {
    await withAwsEnv(rootKeys(), async () => {
      const [port] = freePorts(1);
      const s = createS3UploadStore({ bucket: "b-x", endpoint: `http://127.0.0.1:${port}`, forcePathStyle: true, callTimeoutMs: 5_000 });
      const err = await caught(s.locate("team-a", "t", HASH(7), origin));
      expect(err.status).toBe(503);
      expect(err.message).toContain("upload store: HEAD in bucket b-x");
    });
  });

  test("a store that accepts the connection and never answers: 503 within the call bound", async () => {
    const silent = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
    try {
      await withAwsEnv(rootKeys(), async () => {
        const s = createS3UploadStore({ bucket: "b-x", endpoint: `http://127.0.0.1:${silent.port}`, forcePathStyle: true, callTimeoutMs: 400 });
        const started = performance.now();
        const err = await caught(s.locate("team-a", "t", HASH(8), origin));
        const ms = performance.now() - started;
        expect(err.status).toBe(503);
        expect(err.message).toContain("did not answer within 400 ms");
        expect(ms).toBeLessThan(5_000);
      });
    } finally {
      silent.stop(true);
    }
  });

  test("a store that fails itself: 500 answers 502 naming S3's status, 503 answers 503 'busy; retry'", async () => {
    let status = 500;
    const srv = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response(null, { status }) });
    try {
      await withAwsEnv(rootKeys(), async () => {
        const s = createS3UploadStore({ bucket: "b-x", endpoint: `http://127.0.0.1:${srv.port}`, forcePathStyle: true });
        const failed = await caught(s.locate("team-a", "t", HASH(10), origin));
        expect([failed.status, failed.message]).toEqual([502, "upload store: HEAD in bucket b-x: S3 answered HTTP 500 (Unknown)"]);
        status = 503;
        const busy = await caught(s.locate("team-a", "t", HASH(10), origin));
        expect([busy.status, busy.message]).toEqual([503, "upload store: HEAD in bucket b-x: S3 is busy (HTTP 503); retry"]);
      });
    } finally {
      srv.stop(true);
    }
  });

  test("calls past the in-flight cap answer 503 at once; the slot frees when a call ends", async () => {
    const silent = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
    try {
      await withAwsEnv(rootKeys(), async () => {
        const s = createS3UploadStore({ bucket: "b-x", endpoint: `http://127.0.0.1:${silent.port}`, forcePathStyle: true, callTimeoutMs: 600, maxInFlight: 2 });
        // Two link calls (a build's GET has its own allowance: tests/integration/e2b-builds/s3-bounds.test.ts).
        const held = [caught(s.locate("team-a", "t", HASH(12), origin)), caught(s.locate("team-a", "t", HASH(13), origin))];
        const started = performance.now();
        const refused = await caught(s.locate("team-a", "t", HASH(14), origin));
        expect(performance.now() - started).toBeLessThan(100);
        expect([refused.status, refused.message]).toEqual([503, "upload store: HEAD in bucket b-x: 2 S3 calls already in flight; retry"]);
        expect((await Promise.all(held)).map((e) => e.status)).toEqual([503, 503]);
        // Both slots are free again: the next call waits for S3 (and times out) instead of being refused.
        expect((await caught(s.locate("team-a", "t", HASH(15), origin))).message).toContain("did not answer within 600 ms");
      });
    } finally {
      silent.stop(true);
    }
  });

  test("a GetObject body that stalls mid-way errors after the idle bound instead of hanging the build", async () => {
    // A stand-in server on a raw socket: a 200 with Content-Length 1000 and the first 10 bytes, then nothing.
    const srv = Bun.listen({
      hostname: "127.0.0.1",
      port: 0,
      socket: {
        data(socket) {
          socket.write("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\nContent-Type: application/x-tar\r\n\r\n0123456789");
        },
      },
    });
    try {
      await withAwsEnv(rootKeys(), async () => {
        const s = createS3UploadStore({ bucket: "b-x", endpoint: `http://127.0.0.1:${srv.port}`, forcePathStyle: true, bodyIdleMs: 300 });
        const opened = await s.open("team-a", "t", HASH(9));
        if (!opened) throw new Error("open found nothing");
        expect(opened.size).toBe(1000);
        const read = new Response(opened.body).arrayBuffer();
        await expect(read).rejects.toThrow(/stalled for 300 ms/);
      });
    } finally {
      srv.stop(true);
    }
  });
});
