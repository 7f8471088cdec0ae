// The stock JS SDK (e2b 2.51) builds a template with a COPY of a directory through sandbox-e2b whose upload store
// is S3 (a real S3-compatible server, versitygw; path-style on a custom endpoint; keys from the environment through
// the default AWS chain): the SDK PUTs the archive to the presigned link, the build reads it back with GetObject,
// a create from the template sees the files, the object sits at <prefix>/e2b-files/<ns>/<template>/<hash>.tar in
// the server's posix backend, and a rebuild finds it by HEAD, so the SDK does not upload again.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Sandbox, Template } from "e2b";
import { buildClaims, sdkOpts, startBuildStack, type BuildStack } from "#tests/integration/e2b-builds/support.ts";
import { withAwsEnv } from "#tests/integration/uploads-s3/env.ts";
import { startS3Server, type S3Server } from "#tests/support/s3/server.ts";
import { waitFor } from "#tests/support/wait.ts";

const PREFIX = "stack/builds";

let s3: S3Server;
let s: BuildStack;
let ctx: string;
beforeAll(async () => {
  s3 = await startS3Server({ bucket: "e2b-builds" });
  ctx = mkdtempSync(join(tmpdir(), "e2b-build-s3-ctx-"));
  mkdirSync(join(ctx, "data", "sub"), { recursive: true });
  writeFileSync(join(ctx, "data", "a.txt"), "alpha from s3\n");
  writeFileSync(join(ctx, "data", "sub", "b.txt"), "beta from s3\n");
}, 120_000);
afterAll(async () => {
  await s3?.stop();
  if (ctx) rmSync(ctx, { recursive: true, force: true });
});

const opts = () => {
  const o = sdkOpts(s);
  return { apiKey: o.apiKey, apiUrl: o.apiUrl, domain: o.domain };
};
const template = () => Template({ fileContextPath: ctx }).fromImage("base").copy("data/", "/app/data/").runCmd("cat /app/data/a.txt");

/** Archives in the posix backend for `ns`/`name`: file name -> mtime. */
function stored(ns: string, name: string): Map<string, number> {
  const dir = join(s3.root, s3.bucket, PREFIX, "e2b-files", ns, name);
  let names: string[] = [];
  try {
    names = readdirSync(dir);
  } catch {
    return new Map();
  }
  return new Map(names.map((n) => [n, statSync(join(dir, n)).mtimeMs]));
}

test("Template.build with a COPY of a directory through the S3 store; the create sees the files; a rebuild does not upload again", () =>
  // Keys only from the environment (withAwsEnv keeps the machine's own profile and instance metadata out).
  withAwsEnv({ AWS_ACCESS_KEY_ID: s3.accessKeyId, AWS_SECRET_ACCESS_KEY: s3.secretAccessKey }, async () => {
    s = await startBuildStack({
      store: false,
      proxy: true,
      nodes: 1,
      extra: [`--e2b-build-store-s3-bucket=${s3.bucket}`, `--e2b-build-store-s3-prefix=${PREFIX}`, `--e2b-build-store-s3-endpoint=${s3.endpoint}`, "--e2b-build-store-s3-force-path-style"],
    });
    try {
      await buildTwice();
    } finally {
      await s.stop();
    }
  }), 180_000);

async function buildTwice(): Promise<void> {
  const logs: string[] = [];
  const info = await Template.build(template(), "s3app", { ...opts(), onBuildLogs: (l) => void logs.push(l.message) });
  expect(info.templateId).toBe("s3app");
  expect(logs).toContain("Uploaded 'data/'");
  expect(logs).toContain("alpha from s3");
  await waitFor("the build sandbox released", () => buildClaims(s) === 0, 10_000);

  // The object is where the docs say, under the prefix, named by the SDK's hash.
  const first = stored("team-a", "s3app");
  expect([...first.keys()]).toHaveLength(1);
  expect([...first.keys()][0]).toMatch(/^[0-9a-f]{64}\.tar$/);

  const sbx = await waitFor("a create from the built template", () => Sandbox.create("s3app", sdkOpts(s)).catch(() => undefined), 15_000, 250);
  try {
    const r = await sbx.commands.run("cat /app/data/a.txt /app/data/sub/b.txt");
    expect(r.stdout).toBe("alpha from s3\nbeta from s3\n");
  } finally {
    await sbx.kill();
  }

  // Same files, same hash: the files check answers present (HEAD), the SDK skips the PUT, the object is untouched.
  const again: string[] = [];
  await Template.build(template(), "s3app", { ...opts(), onBuildLogs: (l) => void again.push(l.message) });
  expect(again).toContain("Skipping upload of 'data/', already cached");
  expect(again).not.toContain("Uploaded 'data/'");
  // The step cache may skip the steps themselves; either way the build finishes.
  expect(again).toContain("template s3app ready");
  expect(stored("team-a", "s3app")).toEqual(first);
  await waitFor("the build sandbox released", () => buildClaims(s) === 0, 10_000);
}
