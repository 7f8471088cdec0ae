// sandbox-apiserver (--enable-e2b-api --e2b-builds, the S3 store on a real versitygw, keys in its environment)
// serves the stock JS SDK's Template.build with a COPY of a directory: the SDK uploads through the presigned PUT,
// the build reads the archive back and promotes e2b/<ns>/<name> on the node, the object sits at
// <prefix>/e2b-files/<ns>/<template>/<hash>.tar, a create from the template (at once, although the NodeInventory
// this test publishes does not list it yet) is a clone holding the copied file, and a rebuild does not upload again.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Sandbox, Template } from "e2b";
import { envdCall } from "#shared/e2b/envd.ts";
import { startSandboxdSim, type SandboxdSim } from "#services/sandboxd-sim/sim.ts";
import { freePorts } from "#tests/kube/ports.ts";
import { type Stack, startStack } from "#tests/integration/sandbox-apiserver/fixture.ts";
import { startS3Server, type S3Server } from "#tests/support/s3/server.ts";
import { e2bServerArgs, publishSimNode, writeE2bFiles } from "#tests/support/e2b-apiserver.ts";
import { waitFor } from "#tests/support/wait.ts";

const ROOT = "root-e2b-builds-apiserver-s3";
const KEY = "e2b_4444444444444444444444444444444444444444";
const PREFIX = "kube";
let stack: Stack;
let sim: SandboxdSim;
let s3: S3Server;
let ctx: string;

beforeAll(async () => {
  s3 = await startS3Server();
  stack = await startStack();
  sim = await startSandboxdSim({ rootToken: ROOT, pools: ["img:1/none/small=2"], guestAgents: true });
  writeE2bFiles(stack.dir, `${KEY} team\n`);
  ctx = mkdtempSync(join(tmpdir(), "e2b-apiserver-s3-ctx-"));
  mkdirSync(join(ctx, "conf"));
  writeFileSync(join(ctx, "conf", "app.ini"), "x=1\n");
}, 120_000);

afterAll(async () => {
  await sim?.stop();
  await stack?.stop();
  await s3?.stop();
  if (ctx) rmSync(ctx, { recursive: true, force: true });
});

test("sandbox-apiserver with the S3 store: Template.build with a COPY of a directory, the object in the bucket, a create from it, a rebuild without an upload", async () => {
  await waitFor("warm VMs", () => sim.info().pools.every((p) => p.warm > 0), 20_000);
  await publishSimNode(stack, sim);
  const [e2bPort] = freePorts(1);
  const server = await stack.startServer({
    args: e2bServerArgs(
      { rootToken: ROOT, port: e2bPort, dir: stack.dir },
      "--e2b-builds",
      `--e2b-build-store-s3-bucket=${s3.bucket}`,
      `--e2b-build-store-s3-prefix=${PREFIX}`,
      `--e2b-build-store-s3-endpoint=${s3.endpoint}`,
      "--e2b-build-store-s3-force-path-style",
    ),
    // Keys only from the environment: no profile file, no instance metadata.
    env: {
      AWS_ACCESS_KEY_ID: s3.accessKeyId,
      AWS_SECRET_ACCESS_KEY: s3.secretAccessKey,
      AWS_SHARED_CREDENTIALS_FILE: "/nonexistent/aws/credentials",
      AWS_CONFIG_FILE: "/nonexistent/aws/config",
      AWS_EC2_METADATA_DISABLED: "true",
    },
  });
  const opts = { apiKey: KEY, apiUrl: `http://127.0.0.1:${e2bPort}`, domain: "sb.test" };
  const template = () => Template({ fileContextPath: ctx }).fromImage("base").copy("conf/", "/home/user/conf/").runCmd("grep -q x=1 /home/user/conf/app.ini && echo copied");
  try {
    const logs: string[] = [];
    await Template.build(template(), "app", { ...opts, onBuildLogs: (l) => void logs.push(l.message) });
    expect(logs).toContain("Uploaded 'conf/'");
    expect(logs).toContain("copied");
    expect((sim.info().templates ?? []).map((t) => t.key.template)).toContain("e2b/team/app");
    const objects = readdirSync(join(s3.root, s3.bucket, PREFIX, "e2b-files", "team", "app"));
    expect(objects).toHaveLength(1);
    expect(objects[0]).toMatch(/^[0-9a-f]{64}\.tar$/);

    // The inventory still lists no template (nothing republished it): this replica's own promote is what the create
    // finds (shared/e2b/template-writes.ts). The claim is a clone of e2b/team/app and holds the copied file.
    const sbx = await Sandbox.create("app", opts);
    try {
      const claim = sim.claims().find((c) => c.id === sbx.sandboxId.replace("sb-", "sb_"))!;
      expect(claim.key.template).toBe("e2b/team/app");
      const token = (sbx as unknown as { envdAccessToken: string }).envdAccessToken;
      const file = await envdCall(
        { address: sim.addr, claimId: claim.id, rootToken: ROOT },
        { method: "GET", path: "/files?path=%2Fhome%2Fuser%2Fconf%2Fapp.ini&username=user", headers: { "x-access-token": token }, timeoutMs: 5_000 },
      );
      expect(file.status).toBe(200);
      expect(file.body.toString("utf8")).toBe("x=1\n");
    } finally {
      await sbx.kill();
    }

    const again: string[] = [];
    await Template.build(template(), "app", { ...opts, onBuildLogs: (l) => void again.push(l.message) });
    expect(again).toContain("Skipping upload of 'conf/', already cached");
    expect(again).not.toContain("Uploaded 'conf/'");
    expect(again).toContain("template app ready");
    expect(readdirSync(join(s3.root, s3.bucket, PREFIX, "e2b-files", "team", "app"))).toEqual(objects);
    await waitFor("no build claim left", () => sim.claims().filter((c) => (c.claimRef ?? "").includes("/e2b-build-")).length === 0, 10_000);
  } finally {
    await server.stop();
  }
}, 180_000);
