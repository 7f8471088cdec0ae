// The stock JS SDK (e2b 2.51) builds a template through sandbox-e2b (Template.build: /v3/templates, the files
// check, the signed PUT, the start, the status polls), then creates sandboxes from it and checks what the build
// left: the marker from RUN, the env, the workdir, the user, the copied directory and file (docs/e2b.md "Builds").
import { afterAll, beforeAll, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Sandbox, Template, waitForFile } from "e2b";
import { buildClaims, sdkOpts, startBuildStack, type BuildStack } from "#tests/integration/e2b-builds/support.ts";
import { makeBuildContext } from "#tests/support/build-context.ts";
import { waitFor } from "#tests/support/wait.ts";

let s: BuildStack;
let ctx: string;
beforeAll(async () => {
  s = await startBuildStack({ proxy: true, nodes: 1, uploadMax: 256 * 1024 });
  ctx = makeBuildContext("e2b-build-ctx-");
}, 60_000);
afterAll(async () => {
  await s.stop();
  rmSync(ctx, { recursive: true, force: true });
});

const opts = () => {
  const o = sdkOpts(s);
  return { apiKey: o.apiKey, apiUrl: o.apiUrl, domain: o.domain };
};

test("build_copy_run_ready: Template.build with runCmd, copy (a directory and a file), setEnvs, setWorkdir, setUser, setStartCmd + ready check; onBuildLogs sees the steps", async () => {
  const template = Template({ fileContextPath: ctx })
    .fromImage("base")
    .runCmd("echo built > /opt/marker", { user: "root" })
    .runCmd("echo visible-in-logs")
    .setEnvs({ A: "1", GREETING: "hello $A" })
    .setWorkdir("/app")
    .setUser("app")
    .copy("data/", "/app/data/")
    .copy("single.txt", "/app/single.txt")
    .setStartCmd("touch /tmp/started; sleep 600", waitForFile("/tmp/started"));
  const logs: { message: string; level: string }[] = [];
  const info = await Template.build(template, "sdkapp:v1", { ...opts(), onBuildLogs: (l) => void logs.push({ message: l.message, level: l.level }) });
  expect(info.templateId).toBe("sdkapp");
  expect(info.tags).toEqual(["v1"]);
  expect(logs.some((l) => l.message === "visible-in-logs")).toBe(true);
  expect(logs.some((l) => l.message.includes("Uploaded"))).toBe(true);
  expect(logs.some((l) => l.message.includes("ready command succeeded"))).toBe(true);
  // Read your own writes: the fleet view lists the promoted template one poll later, but this replica answers
  // exists and creates from it at once (shared/e2b/template-writes.ts).
  expect(await Template.exists("sdkapp", opts())).toBe(true);
  const sbx = await Sandbox.create("sdkapp", sdkOpts(s));
  await waitFor("the build sandbox released", () => buildClaims(s) === 0, 10_000);
  try {
    const run = async (cmd: string) => (await sbx.commands.run(cmd)).stdout.trim();
    expect(await run("cat /opt/marker")).toBe("built");
    expect(await run('echo "$A|$GREETING"')).toBe("1|hello 1");
    expect(await run("pwd")).toBe("/app");
    expect(await run("whoami")).toBe("app");
    expect(await run("cat /app/data/a.txt /app/data/sub/b.txt /app/single.txt")).toBe("alpha\nbeta\none file");
    expect(await run("stat -c %U /app/data/a.txt")).toBe("app");
    expect(await run("test -f /tmp/started && echo yes")).toBe("yes");
  } finally {
    await sbx.kill();
  }

  // Tags are node template labels: the build's tag lists, and `name:tag` is a create target too.
  const tags = await Template.getTags("sdkapp", opts());
  expect(tags.map((t) => t.tag)).toEqual(["v1"]);
  const tagged = await Sandbox.create("sdkapp:v1", sdkOpts(s));
  try {
    expect((await tagged.commands.run("cat /opt/marker")).stdout).toBe("built\n");
  } finally {
    await tagged.kill();
  }
}, 180_000);

// Needs the simulator guest to keep a promoted template's running commands (services/sandboxd-sim/guest/captures.ts).
test("the start command runs in a clone of the built template (the simulator's promote keeps the commands running at promote time)", async () => {
  const template = Template().fromImage("base").setStartCmd("exec sleep 617", waitForFile("/etc/passwd"));
  await Template.build(template, "sdkstart", opts());
  const sbx = await waitFor("a create from the built template", () => Sandbox.create("sdkstart", sdkOpts(s)).catch(() => undefined), 15_000, 250);
  try {
    await waitFor("the start command running in the clone", async () => (await sbx.commands.run("pgrep -f 'sleep [6]17' || true")).stdout.trim() !== "", 10_000, 200);
  } finally {
    await sbx.kill();
  }
}, 60_000);

test("a failing RUN: Template.build throws the step's error, the logs carry it, and no build sandbox is left", async () => {
  const template = Template().fromImage("base").runCmd("echo going").runCmd("echo broken >&2; exit 3");
  const logs: string[] = [];
  const err = await Template.build(template, "sdkfail", { ...opts(), onBuildLogs: (l) => void logs.push(l.message) }).catch((e: Error) => e);
  expect(err).toBeInstanceOf(Error);
  expect(String((err as Error).message)).toContain("exit code 3");
  expect(logs).toContain("going");
  expect(logs).toContain("broken");
  await waitFor("the build sandbox released", () => buildClaims(s) === 0, 10_000);
}, 60_000);

test("an upload over --e2b-build-upload-max: the SDK's PUT is refused (413) and the build never starts", async () => {
  // Random bytes: the SDK gzips the archive, and these do not shrink.
  writeFileSync(join(ctx, "big.bin"), randomBytes(300 * 1024));
  const template = Template({ fileContextPath: ctx }).fromImage("base").copy("big.bin", "/tmp/big.bin");
  const err = await Template.build(template, "sdkbig", opts()).catch((e: Error) => e);
  expect(err).toBeInstanceOf(Error);
  expect(String((err as Error).message)).toMatch(/upload/i);
  expect(buildClaims(s)).toBe(0);
}, 60_000);

test("onBuildLogs receives every line of a build whose log spans several status pages (a page holds at most 1000)", async () => {
  const template = Template().fromImage("base").runCmd("seq 1 2500");
  const logs: string[] = [];
  await Template.build(template, "sdkpages", { ...opts(), onBuildLogs: (l) => void logs.push(l.message) });
  const numbers = logs.filter((m) => /^\d+$/.test(m)).map(Number);
  expect(numbers).toEqual(Array.from({ length: 2500 }, (_, i) => i + 1));
  await waitFor("the build sandbox released", () => buildClaims(s) === 0, 10_000);
}, 60_000);
