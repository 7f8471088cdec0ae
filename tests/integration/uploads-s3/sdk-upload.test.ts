// The stock clients' COPY upload path against the S3 store and a real S3 server, without the build API: the JS SDK
// (e2b 2.51, Template.buildInBackground), the Python SDK (e2b 2.63 from the cached venv, build_in_background) and
// the e2b CLI (@e2b/cli 2.19, `template create` from a Dockerfile) talk to a stand-in e2b API whose upload links come
// from the real S3 store (stand-in.ts). What each sends: a gzipped tar per COPY with an exact Content-Length (not
// chunked); S3 accepts it at the key the hash names; a rebuild with the same files finds them present and uploads
// nothing. The CLI sends no header but Content-Length (it drops the link's `headers`), which is why the store signs
// nothing but Host.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Template } from "e2b";
import { createS3UploadStore, type S3UploadStore } from "#shared/e2b/uploads/s3.ts";
import { ensurePythonSdk } from "#tests/support/python/venv.ts";
import { run } from "#tests/support/run.ts";
import { startS3Server, type S3Server } from "#tests/support/s3/server.ts";
import { withAwsEnv } from "./env.ts";
import { startStandIn, tarEntries, type StandIn } from "./stand-in.ts";

const NS = "team-a";
let s3: S3Server;
let context: string;
let store: S3UploadStore;
let standIn: StandIn;

beforeAll(async () => {
  s3 = await startS3Server();
  context = mkdtempSync(join(tmpdir(), "sdk-upload-"));
  mkdirSync(join(context, "data", "sub"), { recursive: true });
  writeFileSync(join(context, "data", "a.txt"), "alpha\n");
  writeFileSync(join(context, "data", "sub", "b.txt"), "beta\n".repeat(1000));
  writeFileSync(join(context, "one.txt"), "single file\n");
  writeFileSync(join(context, "Dockerfile"), "FROM ubuntu:22.04\nCOPY data/ /app/data/\nCOPY one.txt /app/one.txt\nRUN echo built > /opt/marker\n");
  store = createS3UploadStore({ bucket: s3.bucket, prefix: "sdk", endpoint: s3.endpoint, region: s3.region, forcePathStyle: true });
  standIn = startStandIn(store, s3.endpoint, NS);
});

afterAll(async () => {
  standIn?.stop();
  await s3?.stop();
  rmSync(context, { recursive: true, force: true });
});

const keys = () => ({ AWS_ACCESS_KEY_ID: s3.accessKeyId, AWS_SECRET_ACCESS_KEY: s3.secretAccessKey });

/**
 * The uploads of the last build of `template` (2 COPY steps): each a 200 from S3, an exact Content-Length, gzip, at
 * the key its hash names, byte for byte what the store reads back; the directory copy holds the tree, the file copy
 * one file, both relative to the context.
 */
async function expectTwoUploads(template: string, since: number): Promise<void> {
  const puts = standIn.puts.slice(since);
  expect(puts).toHaveLength(2);
  for (const put of puts) {
    expect(put.status).toBe(200);
    expect(put.headers["content-length"]).toBe(String(put.bytes.length));
    expect(put.headers["transfer-encoding"]).toBeUndefined();
    expect([put.bytes[0], put.bytes[1]]).toEqual([0x1f, 0x8b]);
  }
  const start = standIn.starts.findLast((s) => s.templateID === template);
  const copies = start!.body.steps.filter((s) => s.type === "COPY");
  expect(copies.map((c) => c.args.slice(0, 2))).toEqual([["data/", "/app/data/"], ["one.txt", "/app/one.txt"]]);
  const entries: Map<string, number>[] = [];
  for (const copy of copies) {
    expect(copy.filesHash).toMatch(/^[0-9a-f]{64}$/);
    const put = puts.find((p) => p.path.endsWith(`/sdk/e2b-files/${NS}/${template}/${copy.filesHash}.tar`));
    if (!put) throw new Error(`no upload for ${copy.args[0]}`);
    const opened = await store.open(NS, template, copy.filesHash!);
    if (!opened) throw new Error(`store has no ${copy.filesHash}`);
    const back = new Uint8Array(await new Response(opened.body).arrayBuffer());
    expect(opened.size).toBe(put.bytes.length);
    expect(Buffer.compare(Buffer.from(back), Buffer.from(put.bytes))).toBe(0);
    entries.push(tarEntries(Bun.gunzipSync(back)));
  }
  expect(entries[0]!.get("data/a.txt")).toBe(6);
  expect(entries[0]!.get("data/sub/b.txt")).toBe(5000);
  expect([...entries[1]!.keys()]).toEqual(["one.txt"]);
}

const jsTemplate = () =>
  Template({ fileContextPath: context }).fromImage("ubuntu:22.04").copy("data/", "/app/data/").copy("one.txt", "/app/one.txt");

describe("the stock JS SDK uploads COPY archives through the S3 store's presigned URLs", () => {
  test("Template.buildInBackground: one gzipped tar per COPY with an exact Content-Length, accepted by S3", async () => {
    await withAwsEnv(keys(), async () => {
      const since = standIn.puts.length;
      const built = await Template.buildInBackground(jsTemplate(), "js-app", { apiKey: "e2b_stand_in", apiUrl: standIn.apiUrl });
      expect(built.templateId).toBe("js-app");
      await expectTwoUploads("js-app", since);
    });
  });

  test("a rebuild with the same files: locate reports them present and the SDK uploads nothing", async () => {
    await withAwsEnv(keys(), async () => {
      const before = standIn.puts.length;
      const logs: string[] = [];
      await Template.buildInBackground(jsTemplate(), "js-app", { apiKey: "e2b_stand_in", apiUrl: standIn.apiUrl, onBuildLogs: (e) => logs.push(e.message) });
      expect(standIn.puts.length).toBe(before);
      expect(logs.filter((m) => m.includes("already cached"))).toHaveLength(2);
    });
  });
});

describe("the stock Python SDK uploads COPY archives through the S3 store's presigned URLs", () => {
  async function pythonBuild(name: string): Promise<{ templateId: string; logs: string[] }> {
    const sdk = await ensurePythonSdk();
    const r = await run([sdk.python, join(import.meta.dir, "python_upload.py"), context, name], {
      env: { ...process.env, STAND_IN_API_URL: standIn.apiUrl },
      timeoutMs: 120_000,
    });
    if (r.code !== 0) throw new Error(`python_upload.py exited ${r.code}: ${r.stderr.slice(-2000)}`);
    return JSON.parse(r.stdout.trim().split("\n").at(-1)!) as { templateId: string; logs: string[] };
  }

  test("Template.build_in_background: the same archives, Content-Length exact, accepted by S3", async () => {
    await withAwsEnv(keys(), async () => {
      const since = standIn.puts.length;
      expect((await pythonBuild("py-app")).templateId).toBe("py-app");
      await expectTwoUploads("py-app", since);
    });
  }, 150_000);

  test("a rebuild with the same files uploads nothing", async () => {
    await withAwsEnv(keys(), async () => {
      const before = standIn.puts.length;
      const { logs } = await pythonBuild("py-app");
      expect(standIn.puts.length).toBe(before);
      expect(logs.filter((m) => m.includes("already cached"))).toHaveLength(2);
    });
  }, 150_000);
});

describe("the e2b CLI uploads COPY archives through the S3 store's presigned URLs", () => {
  const cli = (name: string) =>
    run(["bun", join(import.meta.dir, "../../../node_modules/@e2b/cli/dist/index.js"), "template", "create", name, "--path", context], {
      // A HOME of its own: no login config of the machine's user; the API key and URL as a user exports them.
      env: { ...process.env, HOME: context, E2B_API_KEY: "e2b_stand_in", E2B_API_URL: standIn.apiUrl },
      timeoutMs: 120_000,
    });

  test("template create from a Dockerfile: the same two archives, Content-Length only, accepted by S3; the CLI finishes", async () => {
    await withAwsEnv(keys(), async () => {
      const since = standIn.puts.length;
      const r = await cli("cli-app");
      expect(`${r.code} ${r.code === 0 ? "" : r.stderr.slice(-2000)}`).toBe("0 ");
      expect(r.stdout).toContain("Building sandbox template cli-app finished");
      await expectTwoUploads("cli-app", since);
      for (const put of standIn.puts.slice(since)) {
        expect(Object.keys(put.headers).filter((h) => !["accept", "accept-encoding", "accept-language", "connection", "content-length", "host", "sec-fetch-mode", "user-agent"].includes(h))).toEqual([]);
      }
      const steps = standIn.starts.findLast((s) => s.templateID === "cli-app")!.body.steps;
      expect(steps.find((s) => s.type === "RUN")?.args[0]).toBe("echo built > /opt/marker");
    });
  }, 150_000);
});
