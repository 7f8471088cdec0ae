// Issue 28 item 4 on the kube stack (sandbox-apiserver --enable-e2b-api over a NodeInventory the test publishes as
// vk-sandbox would), with the stock JS SDK 2.51 and Python SDK 2.63: the lifecycle forms are accepted or refused as on
// sandbox-e2b (tests/integration/e2b/sleep.test.ts covers the data plane there), and a sandbox its node put to sleep
// by itself (the pool's idle_hibernate_seconds on the simulator) reads paused in getInfo at once and in the list once
// the inventory says Hibernated; connect wakes it.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Sandbox } from "e2b";
import { startSandboxdSim, type SandboxdSim } from "#services/sandboxd-sim/sim.ts";
import { freePorts } from "../../kube/ports.ts";
import { e2bServerArgs, publishSimNode, writeE2bFiles } from "#tests/support/e2b-apiserver.ts";
import { ensurePythonSdk } from "#tests/support/python/venv.ts";
import { run } from "#tests/support/run.ts";
import { until } from "#tests/support/wait.ts";
import { startTestGuest, type TestGuest } from "./guest.ts";
import { type ApiserverProcess, type Stack, rfc3339, startStack } from "../sandbox-apiserver/fixture.ts";

const ROOT = "root-e2b-sleep";
const KEY = "e2b_4444444444444444444444444444444444444444";
const IDLE_S = 600;
let stack: Stack;
let sim: SandboxdSim;
let guest: TestGuest;
let api: string;
const servers: ApiserverProcess[] = [];

beforeAll(async () => {
  stack = await startStack();
  sim = await startSandboxdSim({ rootToken: ROOT, pools: [`img:1/none/small=4,idle=${IDLE_S}`] });
  guest = await startTestGuest();
  sim.attachGuest("*", 49983, guest.port);
  writeE2bFiles(stack.dir, `${KEY} team-sleep\n`);
  await publishSimNode(stack, sim);
  const [port] = freePorts(1);
  servers.push(await stack.startServer({ args: e2bServerArgs({ rootToken: ROOT, port, dir: stack.dir }) }));
  api = `http://127.0.0.1:${port}`;
}, 60_000);

afterAll(async () => {
  for (const s of servers) await s.stop();
  await sim?.stop();
  await guest?.stop();
  await stack?.stop();
});

const opts = () => ({ apiKey: KEY, apiUrl: api, domain: "sb.test", requestTimeoutMs: 10_000 });
const claimOf = (id: string) => sim.claims().find((c) => c.id === id.replace(/^sb-/, "sb_"));
/** The inventory as vk-sandbox publishes it: every claim of the node, hibernated ones as Hibernated. */
const publishClaims = () =>
  publishSimNode(
    stack,
    sim,
    sim.claims().map((c) => ({ id: c.id, name: c.claimRef, claimRef: c.claimRef, phase: c.state === "running" ? "Running" : "Hibernated", template: c.key.template, claimedAt: rfc3339(c.claimedAt) })),
  );

describe("the JS SDK's lifecycle forms on sandbox-apiserver", () => {
  test("keepMemory: true accepted (archive at timeout); keepMemory: false and pause({keepMemory: false}) 400s that say why", async () => {
    const sbx = await Sandbox.create("base", { ...opts(), timeoutMs: 3_600_000, lifecycle: { onTimeout: { action: "pause", keepMemory: true }, autoResume: true } });
    expect(claimOf(sbx.sandboxId)!.onExpire).toBe("archive");
    const fsOnly = await Sandbox.create("base", { ...opts(), lifecycle: { onTimeout: { action: "pause", keepMemory: false } } }).catch((e: Error) => e);
    expect(String((fsOnly as Error).message)).toMatch(/400.*autoPauseMemory: false.*not supported/);
    const pause = await sbx.pause({ keepMemory: false }).catch((e: Error) => e);
    expect(String((pause as Error).message)).toMatch(/400.*pause with memory: false.*not supported/);
    expect(claimOf(sbx.sandboxId)!.state).toBe("running");
    await sbx.kill();
  });

  test("a sandbox asleep by itself: getInfo paused at once, the list once the inventory says so, connect wakes it", async () => {
    const sbx = await Sandbox.create("base", { ...opts(), timeoutMs: 3_600_000 });
    await publishClaims();
    sim.clock.advance(IDLE_S * 1000 + 1000);
    sim.idleNow();
    expect(claimOf(sbx.sandboxId)!.state).toBe("hibernated");
    expect((await Sandbox.getInfo(sbx.sandboxId, opts())).state).toBe("paused");
    await publishClaims();
    await until(async () => (await Sandbox.list({ ...opts(), query: { state: ["paused"] } }).nextItems()).some((x) => x.sandboxId === sbx.sandboxId), "the list to show it paused", 10_000, 50);
    const again = await Sandbox.connect(sbx.sandboxId, { ...opts(), timeoutMs: 3_600_000 });
    expect((await again.getInfo()).state).toBe("running");
    expect(claimOf(sbx.sandboxId)!.state).toBe("running");
    await again.kill();
  }, 30_000);
});

const PY = [
  "import json",
  "from e2b import Sandbox",
  "def refused(f):",
  "    try:",
  "        f()",
  "        return 'accepted'",
  "    except Exception as e:",
  "        return type(e).__name__ + ': ' + str(e)",
  "sb = Sandbox.create('base', timeout=3600, lifecycle={'on_timeout': {'action': 'pause', 'mode': 'full'}, 'auto_resume': True})",
  "out = {'id': sb.sandbox_id}",
  "out['create_fs'] = refused(lambda: Sandbox.create('base', lifecycle={'on_timeout': {'action': 'pause', 'mode': 'filesystem'}}))",
  "out['pause_fs'] = refused(lambda: sb.pause(mode='filesystem'))",
  "out['snapshot_fs'] = refused(lambda: sb.create_snapshot(mode='filesystem'))",
  "sb.kill()",
  "print(json.dumps(out))",
].join("\n");

describe("the Python SDK's lifecycle forms on sandbox-apiserver", () => {
  test('mode "full" accepted; mode "filesystem" a 400 at create, pause and create_snapshot', async () => {
    const dir = mkdtempSync(join(tmpdir(), "e2b-apisleep-"));
    try {
      writeFileSync(join(dir, "forms.py"), PY);
      const { python } = await ensurePythonSdk();
      const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("E2B_")));
      Object.assign(env, { E2B_API_KEY: KEY, E2B_API_URL: api, E2B_DOMAIN: "sb.test", E2B_HTTP_VERSION: "1.1", PYTHONUNBUFFERED: "1" });
      const r = await run([python, join(dir, "forms.py")], { env, timeoutMs: 60_000 });
      expect(r.stderr).toBe("");
      const got = JSON.parse(r.stdout.trim().split("\n").at(-1)!);
      expect(got.create_fs).toMatch(/400.*autoPauseMemory: false.*mode "filesystem".*not supported/);
      expect(got.pause_fs).toMatch(/400.*pause with memory: false.*mode "filesystem".*not supported/);
      expect(got.snapshot_fs).toMatch(/400.*snapshot with memory: false.*mode "filesystem".*not supported/);
      expect(sim.node.checkpoints.size).toBe(0); // the refused snapshot took none
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 90_000);
});
