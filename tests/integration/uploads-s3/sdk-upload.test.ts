// The stock JS SDK's (e2b 2.51) COPY upload path against the S3 store and a real S3 server, without the build API:
// a stand-in e2b API answers the three calls Template.buildInBackground makes (POST /v3/templates, GET
// /templates/{id}/files/{hash} through the real S3 store's locate, POST /v2/templates/{id}/builds/{buildID}), and a
// recording hop in front of versitygw keeps what the SDK's PUT carried before passing it on unchanged (the host the
// URL was signed for is the one the hop forwards to, so the signature still holds). What the SDK sends: a gzipped
// tar with an exact Content-Length (not chunked), only the headers locate gave; S3 accepts it; a rebuild with the
// same files finds them present and uploads nothing.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Template } from "e2b";
import { createS3UploadStore, type S3UploadStore } from "#shared/e2b/uploads/s3.ts";
import { startS3Server, type S3Server } from "#tests/support/s3/server.ts";
import { withAwsEnv } from "./env.ts";

interface SeenPut {
  path: string;
  headers: Record<string, string>;
  bytes: Uint8Array;
  status: number;
}

let s3: S3Server;
let context: string;
let store: S3UploadStore;
const puts: SeenPut[] = [];
const starts: { templateID: string; body: { steps: { type: string; args: string[]; filesHash?: string }[] } }[] = [];
let hop: ReturnType<typeof Bun.serve>;
let api: ReturnType<typeof Bun.serve>;

beforeAll(async () => {
  s3 = await startS3Server();
  context = mkdtempSync(join(tmpdir(), "sdk-upload-"));
  mkdirSync(join(context, "data", "sub"), { recursive: true });
  writeFileSync(join(context, "data", "a.txt"), "alpha\n");
  writeFileSync(join(context, "data", "sub", "b.txt"), "beta\n".repeat(1000));
  writeFileSync(join(context, "one.txt"), "single file\n");
  store = createS3UploadStore({ bucket: s3.bucket, prefix: "sdk", endpoint: s3.endpoint, region: s3.region, forcePathStyle: true });

  hop = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      const url = new URL(req.url);
      const bytes = new Uint8Array(await req.arrayBuffer());
      const headers = Object.fromEntries(req.headers.entries());
      const forwarded: Record<string, string> = {};
      for (const [k, v] of Object.entries(headers)) if (k !== "host" && k !== "connection") forwarded[k] = v;
      const r = await fetch(`${s3.endpoint}${url.pathname}${url.search}`, { method: req.method, headers: forwarded, body: bytes });
      const text = await r.text();
      puts.push({ path: url.pathname, headers, bytes, status: r.status });
      return new Response(text, { status: r.status });
    },
  });
  api = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      const url = new URL(req.url);
      const parts = url.pathname.split("/").filter(Boolean);
      if (req.method === "POST" && url.pathname === "/v3/templates") {
        const { name } = (await req.json()) as { name: string };
        return Response.json({ templateID: name, buildID: crypto.randomUUID(), public: true, names: [name], tags: [], aliases: [name] }, { status: 202 });
      }
      if (req.method === "GET" && parts[0] === "templates" && parts[2] === "files") {
        const link = await store.locate("team-a", parts[1]!, parts[3]!, { baseUrl: url.origin });
        if (link.present) return Response.json(link, { status: 201 });
        // Same path and query (what was signed) through the recording hop.
        const signed = new URL(link.url);
        return Response.json({ ...link, url: `http://127.0.0.1:${hop.port}${signed.pathname}${signed.search}` }, { status: 201 });
      }
      if (req.method === "POST" && parts[0] === "v2" && parts[3] === "builds") {
        starts.push({ templateID: parts[2]!, body: (await req.json()) as (typeof starts)[number]["body"] });
        return new Response(null, { status: 202 });
      }
      return Response.json({ code: 404, message: `stand-in: no ${req.method} ${url.pathname}` }, { status: 404 });
    },
  });
});

afterAll(async () => {
  api?.stop(true);
  hop?.stop(true);
  await s3?.stop();
  rmSync(context, { recursive: true, force: true });
});

/** Entry names and sizes of a (plain) tar archive: 512-byte headers, ustar prefix joined, size in octal. */
function tarEntries(tar: Uint8Array): Map<string, number> {
  const out = new Map<string, number>();
  const text = (from: number, len: number) => new TextDecoder().decode(tar.subarray(from, from + len)).replace(/\0.*$/s, "");
  for (let off = 0; off + 512 <= tar.length; ) {
    const name = text(off, 100);
    if (!name) break;
    const prefix = text(off + 345, 155);
    const size = parseInt(text(off + 124, 12).trim() || "0", 8);
    out.set(prefix ? `${prefix}/${name}` : name, size);
    off += 512 + Math.ceil(size / 512) * 512;
  }
  return out;
}

const sdkTemplate = () =>
  Template({ fileContextPath: context }).fromImage("ubuntu:22.04").copy("data/", "/app/data/").copy("one.txt", "/app/one.txt");

describe("the stock e2b SDK uploads COPY archives through the S3 store's presigned URLs", () => {
  test("Template.buildInBackground: one gzipped tar per COPY with an exact Content-Length, accepted by S3; the start names their hashes", async () => {
    await withAwsEnv({ AWS_ACCESS_KEY_ID: s3.accessKeyId, AWS_SECRET_ACCESS_KEY: s3.secretAccessKey }, async () => {
      const built = await Template.buildInBackground(sdkTemplate(), "sdk-app", { apiKey: "e2b_stand_in", apiUrl: `http://127.0.0.1:${api.port}` });
      expect(built.templateId).toBe("sdk-app");

      expect(puts).toHaveLength(2);
      for (const put of puts) {
        expect(put.status).toBe(200);
        expect(put.headers["content-length"]).toBe(String(put.bytes.length));
        expect(put.headers["transfer-encoding"]).toBeUndefined();
        // gzip magic: the SDK's default for COPY.
        expect([put.bytes[0], put.bytes[1]]).toEqual([0x1f, 0x8b]);
      }

      const copies = starts.at(-1)!.body.steps.filter((s) => s.type === "COPY");
      expect(copies.map((c) => c.args.slice(0, 2))).toEqual([["data/", "/app/data/"], ["one.txt", "/app/one.txt"]]);
      const entries: Map<string, number>[] = [];
      for (const copy of copies) {
        expect(copy.filesHash).toMatch(/^[0-9a-f]{64}$/);
        // The object sits at the key the hash names, and is exactly what the SDK sent.
        const put = puts.find((p) => p.path.endsWith(`/sdk/e2b-files/team-a/sdk-app/${copy.filesHash}.tar`));
        if (!put) throw new Error(`no upload for ${copy.args[0]}`);
        const opened = await store.open("team-a", "sdk-app", copy.filesHash!);
        if (!opened) throw new Error(`store has no ${copy.filesHash}`);
        const back = new Uint8Array(await new Response(opened.body).arrayBuffer());
        expect(opened.size).toBe(put.bytes.length);
        expect(Buffer.compare(Buffer.from(back), Buffer.from(put.bytes))).toBe(0);
        entries.push(tarEntries(Bun.gunzipSync(back)));
      }
      // Paths are relative to the context directory; the directory copy holds the tree, the file copy one file.
      expect(entries[0]!.get("data/a.txt")).toBe(6);
      expect(entries[0]!.get("data/sub/b.txt")).toBe(5000);
      expect([...entries[1]!.keys()]).toEqual(["one.txt"]);
    });
  });

  test("a rebuild with the same files: locate reports them present and the SDK uploads nothing", async () => {
    await withAwsEnv({ AWS_ACCESS_KEY_ID: s3.accessKeyId, AWS_SECRET_ACCESS_KEY: s3.secretAccessKey }, async () => {
      const before = puts.length;
      const logs: string[] = [];
      await Template.buildInBackground(sdkTemplate(), "sdk-app", {
        apiKey: "e2b_stand_in",
        apiUrl: `http://127.0.0.1:${api.port}`,
        onBuildLogs: (e) => logs.push(e.message),
      });
      expect(puts.length).toBe(before);
      expect(logs.filter((m) => m.includes("already cached"))).toHaveLength(2);
    });
  });
});
