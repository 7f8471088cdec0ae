// The desktop SDKs, `@e2b/desktop` (npm) and `e2b-desktop` (PyPI), against the sandbox-e2b mesh, as far as the
// simulator's guest can serve them (issue 30 item 6): their create from the `desktop` template (an alias of the pool
// image here) runs Xvfb and XFCE in the sandbox and waits for them, which a guest without a display server cannot
// start, so the create ends in the SDK's own "Could not start Xvfb" (and the SDK kills the sandbox); the
// non-graphical calls (connect, commands, files, kill) on a desktop-template sandbox work as on any sandbox; the
// graphical ones (screenshot, mouse and keyboard through xdotool, the VNC stream) need a graphical guest. The
// verdicts become the "Desktop SDKs" section of docs/sdk-matrix.md. Mesh only: these SDKs add no API call of their
// own (their REST and envd calls are the e2b SDK's, which the e2b matrix runs on both stacks).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { z } from "zod";
import { Sandbox as Base } from "e2b";
import { Sandbox as Desktop } from "@e2b/desktop";
import pkg from "@e2b/desktop/package.json" with { type: "json" };
import { DOMAIN, KEY_A, startStack as startMesh, type Stack } from "#tests/integration/e2b/harness.ts";
import { ensurePythonSdk, pinnedVersion } from "#tests/support/python/venv.ts";
import { run } from "#tests/support/run.ts";
import { MESH, sdkOpts, type Target } from "./stacks.ts";
import { Recorder, differs, errorText, expectThat, fails, ok } from "./recorder.ts";

const GRAPHICAL =
  "needs a graphical guest: the desktop template's sandbox runs Xvfb and XFCE (and scrot, xdotool, x11vnc, noVNC for screenshots, input and the VNC stream); the simulator's guest is the host's userland without a display server, so the SDK's start ends in its own TimeoutError and it kills the sandbox. On a node whose desktop pool image holds them, the same calls are the e2b SDK's envd commands";
const JS = `@e2b/desktop ${pkg.version}`;
const PY = `e2b-desktop ${pinnedVersion("e2b-desktop")} (sync)`;
const rec = new Recorder();

afterAll(() => {
  rec.write(
    "desktop",
    `Desktop SDKs: @e2b/desktop (JS) ${pkg.version} and e2b-desktop (Python) ${pinnedVersion("e2b-desktop")}`,
    [
      `The stock \`@e2b/desktop\` ${pkg.version} from npm and \`e2b-desktop\` ${pinnedVersion("e2b-desktop")} from PyPI, their default template`,
      "`desktop` (an alias of the simulated pool image), on the sandbox-e2b mesh. The desktop create cannot run here (its",
      "note says why); the non-graphical calls run on a desktop-template sandbox reached with the desktop SDK's connect.",
      "Not run at all, for the same reason: the mouse and keyboard calls (xdotool) and `stream.start` (x11vnc, noVNC).",
      "Suite: tests/e2e/sdk-matrix/desktop.test.ts (the Python calls: tests/e2e/sdk-matrix/desktop.py).",
    ].join("\n"),
    [MESH],
  );
});

const Outcome = z.union([z.object({ raised: z.string(), mro: z.array(z.string()), message: z.string() }), z.object({ returned: z.union([z.boolean(), z.number(), z.string(), z.null()]) })]);

describe(MESH, () => {
  let s: Stack;
  let t: Target;
  beforeAll(async () => {
    s = await startMesh({ proxy: true, guestAgents: true, aliases: "base img:1\ndesktop img:1\n" });
    t = { stack: MESH, apiKey: KEY_A, apiUrl: s.apiUrl, sandboxUrl: s.proxyUrl!, domain: DOMAIN };
  }, 60_000);
  afterAll(async () => {
    await s?.stop();
  });
  const running = async () => (await Base.list({ ...sdkOpts(t), query: { state: ["running"] } }).nextItems()).length;

  test(`${JS}: create, then connect, commands, files, screenshot, kill`, async () => {
    const o = sdkOpts(t);
    const c = (call: string, fn: () => Promise<import("./recorder.ts").Judgement>, onError?: (e: unknown) => import("./recorder.ts").Judgement | undefined) => rec.cell(MESH, JS, call, fn, onError);
    const before = await running();
    const created = await c("Sandbox.create() (desktop template)", async () => {
      const sbx = await Desktop.create({ ...o, timeoutMs: 120_000 });
      await sbx.kill();
      return fails("started a desktop");
    }, (e) => (errorText(e).includes("Could not start Xvfb") ? differs(GRAPHICAL, errorText(e)) : undefined));
    expect(created.verdict).toBe("differs");
    expect(await running()).toBe(before);
    const base = await Base.create("desktop", { ...o, timeoutMs: 120_000, envs: { DISPLAY: ":0" } });
    let desk!: Desktop;
    await c("Sandbox.connect", async () => {
      desk = await Desktop.connect(base.sandboxId, o);
      return expectThat(desk.sandboxId === base.sandboxId, desk.sandboxId);
    });
    await c("commands.run", async () => {
      const r = await desk.commands.run("echo $DISPLAY; uname -s");
      return expectThat(r.stdout === ":0\nLinux\n", r.stdout);
    });
    await c("files.write / files.read", async () => {
      await desk.files.write("notes.txt", "desktop");
      const back = await desk.files.read("notes.txt");
      return expectThat(back === "desktop", back);
    });
    // scrot is not in the guest: the SDK's `scrot --pointer` exits 127 (command not found).
    const shot = await c("screenshot", async () => (await desk.screenshot(), fails("took a screenshot")), (e) => {
      const exit = (e as { exitCode?: unknown }).exitCode;
      return e instanceof Error && e.name === "CommandExitError" && exit === 127 ? differs(GRAPHICAL, `${errorText(e)} exit ${String(exit)}`) : undefined;
    });
    expect(shot.verdict).toBe("differs");
    await c("kill", async () => (await desk.kill(), expectThat(!(await desk.isRunning()), "still running")));
    expect(rec.failures(MESH)).toEqual([]);
  }, 180_000);

  test(`${PY}: create, then connect, commands, files, screenshot, kill`, async () => {
    const { python } = await ensurePythonSdk();
    const env: Record<string, string | undefined> = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("E2B_")));
    Object.assign(env, { E2B_API_KEY: t.apiKey, E2B_API_URL: t.apiUrl, E2B_SANDBOX_URL: t.sandboxUrl, E2B_DOMAIN: t.domain, PYTHONUNBUFFERED: "1" });
    const before = await running();
    const r = await run([python, join(import.meta.dir, "desktop.py")], { env, timeoutMs: 150_000 });
    const last = r.stdout.trim().split("\n").at(-1) ?? "";
    if (r.code !== 0) throw new Error(`desktop.py exited ${r.code}:\n${r.stderr.slice(-3000)}`);
    const out = z.record(z.string(), Outcome).parse(JSON.parse(last));
    const seen = (k: string) => JSON.stringify(out[k]).slice(0, 200);
    const cell = (call: string, j: import("./recorder.ts").Judgement) => rec.cell(MESH, PY, call, async () => j);
    const created = out["Sandbox.create()"];
    await cell("Sandbox.create() (desktop template)", created && "raised" in created && created.raised === "TimeoutException" && created.message.includes("Could not start Xvfb") ? differs(GRAPHICAL, seen("Sandbox.create()")) : fails(seen("Sandbox.create()")));
    await cell("Sandbox.connect", out["Sandbox.connect"]?.["returned" as never] === true ? ok() : fails(seen("Sandbox.connect")));
    const cmd = out["commands.run"];
    await cell("commands.run", cmd && "returned" in cmd && cmd.returned === ":0\nLinux\n" ? ok() : fails(seen("commands.run")));
    const file = out["files.write / files.read"];
    await cell("files.write / files.read", file && "returned" in file && file.returned === "desktop" ? ok() : fails(seen("files.write / files.read")));
    const shot = out.screenshot;
    await cell("screenshot", shot && "raised" in shot && shot.raised === "CommandExitException" && shot.message.includes("code 127") ? differs(GRAPHICAL, seen("screenshot")) : fails(seen("screenshot")));
    const killed = out.kill;
    await cell("kill", killed && "returned" in killed && killed.returned === true ? ok() : fails(seen("kill")));
    expect(await running()).toBe(before);
    expect(rec.failures(MESH)).toEqual([]);
  }, 240_000);
});
