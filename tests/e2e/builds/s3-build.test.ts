// A build whose COPY goes through the S3 store (--e2b-build-store-s3-*, path-style, a custom endpoint: a real
// versitygw) end to end: the stock JS SDK uploads with the presigned PUT, the build reads the archive back from S3,
// and a sandbox created from the template sees the files. Credentials come from the default AWS chain (here the
// environment, withAwsEnv keeps the machine's own out).
import { expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ListObjectsV2Command } from "@aws-sdk/client-s3";
import { Sandbox, Template } from "e2b";
import { buildClaims, sdkOpts, startBuildStack } from "#tests/integration/e2b-builds/support.ts";
import { withAwsEnv } from "#tests/integration/uploads-s3/env.ts";
import { startS3Server } from "#tests/support/s3/server.ts";
import { waitFor } from "#tests/support/wait.ts";

test("Template.build with COPY through the S3 store, then Sandbox.create sees the files", async () => {
  const s3 = await startS3Server();
  const ctx = mkdtempSync(join(tmpdir(), "e2b-s3-build-ctx-"));
  mkdirSync(join(ctx, "data"), { recursive: true });
  writeFileSync(join(ctx, "data", "a.txt"), "from s3\n");
  try {
    await withAwsEnv({ AWS_ACCESS_KEY_ID: s3.accessKeyId, AWS_SECRET_ACCESS_KEY: s3.secretAccessKey }, async () => {
      const s = await startBuildStack({
        proxy: true,
        store: false,
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
      } finally {
        await s.stop();
      }
    });
  } finally {
    await s3.stop();
    rmSync(ctx, { recursive: true, force: true });
  }
}, 180_000);
