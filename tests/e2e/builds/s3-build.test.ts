// A build whose COPY goes through the S3 store (--e2b-build-store-s3-*, path-style, a custom endpoint: a real
// versitygw) end to end: the stock JS SDK uploads with the presigned PUT, the build reads the archive back from S3,
// and a sandbox created from the template sees the files. Credentials come from the default AWS chain (here the
// environment, withAwsEnv keeps the machine's own out).
import { expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ListObjectsV2Command } from "@aws-sdk/client-s3";
import { Sandbox, Template } from "e2b";
import { buildClaims, sdkOpts, startBuildStack } from "#tests/integration/e2b-builds/support.ts";
import { withAwsEnv } from "#tests/integration/uploads-s3/env.ts";
import { startS3Server } from "#tests/support/s3/server.ts";
import { waitFor } from "#tests/support/wait.ts";

test("Template.build with COPY through the S3 store, then Sandbox.create sees the files; an archive over the bound fails its COPY step", async () => {
  const s3 = await startS3Server();
  const ctx = mkdtempSync(join(tmpdir(), "e2b-s3-build-ctx-"));
  mkdirSync(join(ctx, "data"), { recursive: true });
  writeFileSync(join(ctx, "data", "a.txt"), "from s3\n");
  try {
    await withAwsEnv({ AWS_ACCESS_KEY_ID: s3.accessKeyId, AWS_SECRET_ACCESS_KEY: s3.secretAccessKey }, async () => {
      const s = await startBuildStack({
        proxy: true,
        store: false,
        uploadMax: 64 * 1024,
        extra: [`--e2b-build-store-s3-bucket=${s3.bucket}`, "--e2b-build-store-s3-prefix=builds", `--e2b-build-store-s3-endpoint=${s3.endpoint}`, `--e2b-build-store-s3-region=${s3.region}`, "--e2b-build-store-s3-force-path-style"],
      });
      try {
        const o = sdkOpts(s);
        const template = Template({ fileContextPath: ctx }).fromImage("base").copy("data/", "/home/user/data/");
        await Template.build(template, "s3app", { apiKey: o.apiKey, apiUrl: o.apiUrl, domain: o.domain });
        const listed = await s3.client.send(new ListObjectsV2Command({ Bucket: s3.bucket, Prefix: "builds/e2b-files/team-a/s3app/" }));
        expect(listed.Contents?.map((c) => c.Key)).toHaveLength(1);
        await waitFor("the build sandbox released", () => buildClaims(s) === 0, 10_000);
        const sbx = await waitFor("a create from the template", () => Sandbox.create("s3app", o).catch(() => undefined), 15_000, 250);
        try {
          expect((await sbx.commands.run("cat /home/user/data/a.txt")).stdout).toBe("from s3\n");
        } finally {
          await sbx.kill();
        }
        // S3 takes an archive of any size (a presigned PUT has no size condition): the COPY step refuses one over
        // --e2b-build-upload-max when it reads it back, with the reason, and no build sandbox is left.
        writeFileSync(join(ctx, "big.bin"), randomBytes(200 * 1024));
        const big = Template({ fileContextPath: ctx }).fromImage("base").copy("big.bin", "/tmp/big.bin");
        const err = await Template.build(big, "s3big", { apiKey: o.apiKey, apiUrl: o.apiUrl, domain: o.domain }).catch((e: Error) => e);
        expect(err).toBeInstanceOf(Error);
        expect(String((err as Error).message)).toMatch(/^reading the uploaded files failed: the uploaded archive is \d+ bytes, larger than --e2b-build-upload-max \(65536\)/);
        await waitFor("the build sandbox released", () => buildClaims(s) === 0, 10_000);
      } finally {
        await s.stop();
      }
    });
  } finally {
    await s3.stop();
    rmSync(ctx, { recursive: true, force: true });
  }
}, 180_000);
