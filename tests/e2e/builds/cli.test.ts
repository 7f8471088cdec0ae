// The e2b CLI (@e2b/cli 2.19) `e2b template create` from a small Dockerfile, pointed at sandbox-e2b by E2B_API_KEY,
// E2B_API_URL and E2B_DOMAIN: it parses the Dockerfile with the SDK's Template.fromDockerfile and runs the same
// build API (docs/e2b.md "Builds"); the template it built is then a create target. The CLI asks for 2 vCPUs by
// default, which the size rule maps to `medium`: the test pools are `small`, so it passes --cpu-count 1.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Sandbox } from "e2b";
import { buildClaims, sdkOpts, startBuildStack, type BuildStack } from "#tests/integration/e2b-builds/support.ts";
import { waitFor } from "#tests/support/wait.ts";

const CLI = join(import.meta.dir, "..", "..", "..", "node_modules", "@e2b", "cli", "dist", "index.js");
let s: BuildStack;
let ctx: string;
beforeAll(async () => {
  s = await startBuildStack({ proxy: true });
  ctx = mkdtempSync(join(tmpdir(), "e2b-cli-ctx-"));
  mkdirSync(join(ctx, "files"));
  writeFileSync(join(ctx, "files", "hello.txt"), "from the cli\n");
  writeFileSync(join(ctx, "e2b.Dockerfile"), "FROM base\nRUN echo cli > /home/user/cli-marker\nENV MODE=cli\nCOPY files/ /home/user/files/\n");
}, 60_000);
afterAll(async () => {
  await s.stop();
  rmSync(ctx, { recursive: true, force: true });
});

test("e2b template create <name> builds from e2b.Dockerfile; Sandbox.create(name) sees its RUN, ENV and COPY", async () => {
  const o = sdkOpts(s);
  const child = Bun.spawn(["bun", CLI, "template", "create", "clitpl", "--path", ctx, "--cpu-count", "1"], {
    cwd: ctx,
    env: { ...process.env, E2B_API_KEY: o.apiKey, E2B_API_URL: o.apiUrl, E2B_DOMAIN: o.domain, HOME: ctx, NO_COLOR: "1" },
    stdout: "pipe",
    stderr: "pipe",
  });
  const [code, stdout, stderr] = await Promise.all([child.exited, new Response(child.stdout).text(), new Response(child.stderr).text()]);
  if (code !== 0) throw new Error(`e2b template create exited ${code}:\n${stdout.slice(-3000)}\n${stderr.slice(-3000)}`);
  expect(stdout).toContain("finished");
  await waitFor("the build sandbox released", () => buildClaims(s) === 0, 10_000);
  const sbx = await waitFor("a create from the CLI's template", () => Sandbox.create("clitpl", o).catch(() => undefined), 15_000, 250);
  try {
    expect((await sbx.commands.run("cat /home/user/cli-marker; echo $MODE; cat /home/user/files/hello.txt")).stdout).toBe("cli\ncli\nfrom the cli\n");
  } finally {
    await sbx.kill();
  }
}, 180_000);
