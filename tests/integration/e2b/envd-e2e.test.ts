// End to end with the simulator's envd-compatible guest agents: the stock e2b SDK creates through sandbox-e2b and
// then runs commands and moves files through the in-process envd proxy (header routing, as E2B_SANDBOX_URL does).
import { afterAll, beforeAll, expect, test } from "bun:test";
import { Sandbox } from "e2b";
import { sdkOpts, startStack, type Stack } from "./harness.ts";

let s: Stack;
beforeAll(async () => {
  s = await startStack({ proxy: true, guestAgents: true });
});
afterAll(() => s.stop());

test("e2e_exec_after_create: commands.run through the proxy", async () => {
  const sbx = await Sandbox.create("base", { ...sdkOpts(s), envs: { GREETING: "hi from init" } });
  const r = await sbx.commands.run("echo hello; echo $GREETING");
  expect(r.exitCode).toBe(0);
  expect(r.stdout).toBe("hello\nhi from init\n");
  const streamed: string[] = [];
  const r2 = await sbx.commands.run("for i in 1 2 3; do echo line$i; sleep 0.1; done", { onStdout: (d) => void streamed.push(d) });
  expect(r2.stdout).toBe("line1\nline2\nline3\n");
  expect(streamed.join("")).toBe("line1\nline2\nline3\n");
  await sbx.kill();
});

test("e2e_files_roundtrip: files.write / read / list through the proxy", async () => {
  const sbx = await Sandbox.create("base", sdkOpts(s));
  await sbx.files.write("/home/user/hello.txt", "hello files");
  expect(await sbx.files.read("/home/user/hello.txt")).toBe("hello files");
  const names = (await sbx.files.list("/home/user")).map((e) => e.name);
  expect(names).toContain("hello.txt");
  await sbx.kill();
});

test("is_running_after_kill_false; a forged token is refused by the proxy (401 invalid sandbox access token)", async () => {
  const sbx = await Sandbox.create("base", sdkOpts(s));
  expect(await sbx.isRunning()).toBe(true);
  const forged = await Sandbox.connect(sbx.sandboxId, sdkOpts(s));
  (forged as unknown as { envdAccessToken: string }).envdAccessToken = "0".repeat(64);
  const err = await forged.commands.run("echo no").catch((e) => e);
  expect(err).toBeInstanceOf(Error);
  // Connect streams read only the status: the proxy's 401 is `unauthenticated` (REST wrong tokens: relay.test.ts).
  expect(String(err.message)).toContain("unauthenticated");
  await sbx.kill();
  expect(await sbx.isRunning()).toBe(false);
});

test("pause then a command wakes the sandbox through the proxy (valid-token traffic resumes it)", async () => {
  const sbx = await Sandbox.create("base", sdkOpts(s));
  await sbx.pause();
  expect((await sbx.getInfo()).state).toBe("paused");
  const r = await sbx.commands.run("echo awake");
  expect(r.stdout).toBe("awake\n");
  expect((await sbx.getInfo()).state).toBe("running");
  await sbx.kill();
});
