// The stock Python SDK (e2b 2.63, the venv tests/support/python makes) builds the same template as the JS test
// (build.py), then creates a sandbox from it and reads back what the build left.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { makeBuildContext } from "#tests/support/build-context.ts";
import { ensurePythonSdk } from "#tests/support/python/venv.ts";
import { buildClaims, sdkOpts, startBuildStack, type BuildStack } from "#tests/integration/e2b-builds/support.ts";

let s: BuildStack;
let ctx: string;
beforeAll(async () => {
  s = await startBuildStack({ proxy: true });
  ctx = makeBuildContext("e2b-py-build-ctx-");
}, 60_000);
afterAll(async () => {
  await s.stop();
  rmSync(ctx, { recursive: true, force: true });
});

test("python: Template.build then Sandbox.create sees marker, env, workdir, user and copied files", async () => {
  const sdk = await ensurePythonSdk();
  const o = sdkOpts(s);
  const child = Bun.spawn([sdk.python, join(import.meta.dir, "build.py")], {
    env: { ...process.env, E2B_API_KEY: o.apiKey, E2B_API_URL: o.apiUrl, E2B_SANDBOX_URL: o.sandboxUrl ?? "", E2B_DOMAIN: o.domain, BUILD_CONTEXT: ctx },
    stdout: "pipe",
    stderr: "pipe",
  });
  const [code, stdout, stderr] = await Promise.all([child.exited, new Response(child.stdout).text(), new Response(child.stderr).text()]);
  if (code !== 0) throw new Error(`build.py exited ${code}: ${stderr.slice(-2000)}`);
  const out = JSON.parse(stdout.trim().split("\n").pop()!) as Record<string, unknown>;
  expect(out.templateId).toBe("pyapp");
  expect(out.tags).toEqual(["v1"]);
  expect(out.logs).toContain("visible-in-logs");
  expect(out.marker).toBe("built");
  expect(out.env).toBe("1|hello 1");
  expect(out.pwd).toBe("/app");
  expect(out.user).toBe("app");
  expect(out.files).toBe("alpha\nbeta\none file");
  expect(buildClaims(s)).toBe(0);
}, 180_000);
