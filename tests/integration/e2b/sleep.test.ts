// Issue 28 item 4 on sandbox-e2b (mesh mode, in-process envd proxy, the simulator's envd-compatible guest agents),
// with the stock JS SDK 2.51 and Python SDK 2.63: every lifecycle form the SDKs send is accepted or refused with a
// 400 that says why (never a silent full snapshot), and a sandbox that went to sleep by itself (its pool's
// idle_hibernate_seconds, services/sandboxd-sim/docs/sleep.md) reads `paused` in getInfo and list, then wakes on
// the next command with its state intact (a counter process still counting, a file in /tmp).
// The pool's idle time is long (600 s) so nothing sleeps by accident; a test makes the node's time pass with the
// simulator's clock (advance, then one idle sweep) once every connection to the sandbox is closed.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { RateLimitError, Sandbox, SandboxError } from "e2b";
import { ensurePythonSdk } from "#tests/support/python/venv.ts";
import { run } from "#tests/support/run.ts";
import { until } from "#tests/support/wait.ts";
import { DOMAIN, KEY_A, KEY_B, sdkOpts, startStack, type Stack } from "./harness.ts";

const IDLE_S = 600;
let s: Stack;
beforeAll(async () => {
  // team-b holds at most one sandbox: a sleeping one still counts (docs/decisions.md "Paused sandboxes and quotas").
  s = await startStack({
    proxy: true,
    guestAgents: true,
    pools: [`img:1/none/small=3,idle=${IDLE_S}`],
    keys: `${KEY_A} team-a\n${KEY_B} team-b max-sandboxes=1 creates-per-second=0\n`,
    extraFlags: ["--metrics-bind-address=127.0.0.1:0"],
  });
});
afterAll(() => s.stop());

const claimOf = (id: string) => s.cluster.nodes.flatMap((n) => n.claims()).find((c) => c.id === id.replace(/^sb-/, "sb_"));
const nodeOf = (id: string) => s.cluster.nodes.find((n) => n.claims().some((c) => c.id === id.replace(/^sb-/, "sb_")))!;

/** Lets the node's idle time pass for a sandbox nobody holds open: it hibernates, as sandboxd would. */
async function sleepIdle(id: string): Promise<void> {
  // Every relay the SDK opened (one per request through the proxy) must be closed, or it holds the idle clock.
  await until(() => (claimOf(id)?.holds ?? 0) === 0, "every connection to the sandbox closed", 10_000, 10);
  s.cluster.clock.advance(IDLE_S * 1000 + 1000);
  nodeOf(id).idleNow();
  expect(claimOf(id)?.state).toBe("hibernated");
}

async function pausedInList(id: string, opts = sdkOpts(s)): Promise<boolean> {
  const p = Sandbox.list({ ...opts, query: { state: ["paused"] } });
  const ids: string[] = [];
  while (p.hasNext) ids.push(...(await p.nextItems()).map((x) => x.sandboxId));
  return ids.includes(id);
}

// Each value is written beside the file and renamed over it: a reader sees one whole number, never the moment after
// `>` truncated the file and before echo wrote (contended run 14: Python's int('') in between).
const COUNTER = (file: string) => `sh -c 'i=0; while true; do i=$((i+1)); echo $i > ${file}.next; mv ${file}.next ${file}; sleep 0.1; done'`;

describe("the JS SDK's lifecycle forms", () => {
  test("onTimeout {action: 'pause', keepMemory: true} with autoResume: accepted, the claim archives at its timeout", async () => {
    const sbx = await Sandbox.create("base", { ...sdkOpts(s), timeoutMs: 3_600_000, lifecycle: { onTimeout: { action: "pause", keepMemory: true }, autoResume: true } });
    expect(claimOf(sbx.sandboxId)!.onExpire).toBe("archive");
    expect((await sbx.commands.run("echo ok")).stdout).toBe("ok\n");
    await sbx.kill();
  });

  test("keepMemory: false, autoResume: false and pause({keepMemory: false}) are 400s that say why; no claim is made", async () => {
    const before = s.cluster.nodes.flatMap((n) => n.claims()).length;
    const fsOnly = await Sandbox.create("base", { ...sdkOpts(s), lifecycle: { onTimeout: { action: "pause", keepMemory: false } } }).catch((e: unknown) => e);
    expect(fsOnly).toBeInstanceOf(SandboxError);
    expect(String((fsOnly as Error).message)).toMatch(/400.*autoPauseMemory: false.*filesystem-only auto-pause.*not supported/);
    const noResume = await Sandbox.create("base", { ...sdkOpts(s), lifecycle: { onTimeout: "pause", autoResume: false } }).catch((e: unknown) => e);
    expect(String((noResume as Error).message)).toMatch(/400.*autoResume: \{enabled: false\} is not supported: data-plane traffic/);
    expect(s.cluster.nodes.flatMap((n) => n.claims()).length).toBe(before);

    const sbx = await Sandbox.create("base", { ...sdkOpts(s), timeoutMs: 3_600_000 });
    const pause = await sbx.pause({ keepMemory: false }).catch((e: unknown) => e);
    expect(String((pause as Error).message)).toMatch(/400.*pause with memory: false.*filesystem-only pause.*not supported/);
    expect(claimOf(sbx.sandboxId)!.state).toBe("running"); // nothing was paused
    await sbx.kill();
  });

  test("a sandbox that went to sleep by itself: getInfo and list say paused; a command wakes it with its processes and files", async () => {
    const sbx = await Sandbox.create("base", { ...sdkOpts(s), timeoutMs: 3_600_000, lifecycle: { onTimeout: { action: "pause", keepMemory: true }, autoResume: true } });
    const counter = `/tmp/counter-${sbx.sandboxId}`;
    const handle = await sbx.commands.run(COUNTER(counter), { background: true });
    await sbx.files.write(`/tmp/kept-${sbx.sandboxId}`, "still here");
    await until(async () => Number((await sbx.files.read(counter)).trim()) > 3, "the counter counting", 10_000, 50);
    await handle.disconnect(); // the process keeps running; its output stream no longer holds the sandbox awake

    await sleepIdle(sbx.sandboxId);
    expect(nodeOf(sbx.sandboxId).memory().sandboxes.find((x) => x.id === claimOf(sbx.sandboxId)!.id)!.mem_used_bytes).toBe(0);
    expect((await sbx.getInfo()).state).toBe("paused");
    expect((await Sandbox.getInfo(sbx.sandboxId, sdkOpts(s))).state).toBe("paused");
    await until(() => pausedInList(sbx.sandboxId), "the list to show it paused", 10_000, 50);

    // The first command wakes it (traffic with its token); the counter resumes where it stopped and goes on.
    const first = Number((await sbx.commands.run(`cat ${counter}`)).stdout.trim());
    expect(first).toBeGreaterThan(3);
    expect(claimOf(sbx.sandboxId)!.state).toBe("running");
    await until(async () => Number((await sbx.files.read(counter)).trim()) > first, "the counter still counting after the wake", 10_000, 50);
    expect(await sbx.files.read(`/tmp/kept-${sbx.sandboxId}`)).toBe("still here");
    expect((await sbx.getInfo()).state).toBe("running");
    await sbx.kill();
  }, 60_000);
});

const metric = async (name: string): Promise<number> => {
  const text = await (await fetch(`http://127.0.0.1:${s.mesh.metricsPort}/metrics`)).text();
  return Number(new RegExp(`^${name.replace(/[{}"]/g, "\\$&")} (\\S+)$`, "m").exec(text)?.[1] ?? 0);
};

describe("the first request after sleep, through the envd proxy", () => {
  test("20 concurrent first requests to a sleeping sandbox: one wake on its node, every request served, the wait on /metrics", async () => {
    const sbx = await Sandbox.create("base", { ...sdkOpts(s), timeoutMs: 3_600_000 });
    const file = `/tmp/wake-${sbx.sandboxId}`;
    await sbx.files.write(file, "awake");
    await sleepIdle(sbx.sandboxId);
    // The proxy reads the same fleet view the list does: once it shows the sandbox asleep, so does the proxy.
    await until(() => pausedInList(sbx.sandboxId), "the fleet view to show it asleep", 10_000, 50);
    const node = nodeOf(sbx.sandboxId);
    const wakes = () => node.node.counters.get("wakes_total") ?? 0;
    const before = {
      node: wakes(),
      ok: await metric('sandbox_envd_proxy_wakes_total{outcome="ok"}'),
      count: await metric("sandbox_envd_proxy_wake_seconds_count"),
      sum: await metric("sandbox_envd_proxy_wake_seconds_sum"),
    };
    node.slowWake(300); // this stack's clock is real: the wake takes 300 ms, and every request waits on it
    try {
      const reads = await Promise.all(Array.from({ length: 20 }, () => sbx.files.read(file)));
      expect(reads).toEqual(Array.from({ length: 20 }, () => "awake"));
    } finally {
      node.slowWake(null);
    }
    expect(wakes() - before.node).toBe(1);
    expect(claimOf(sbx.sandboxId)!.state).toBe("running");
    // The requests that found the sandbox asleep in the view (all 20, unless a late one started after the view had
    // already seen it awake again: the view polls every 200 ms) were timed, and the first waited the whole wake.
    const ok = (await metric('sandbox_envd_proxy_wakes_total{outcome="ok"}')) - before.ok;
    expect(ok).toBeGreaterThanOrEqual(1);
    expect(ok).toBeLessThanOrEqual(20);
    expect((await metric("sandbox_envd_proxy_wake_seconds_count")) - before.count).toBe(ok);
    expect((await metric("sandbox_envd_proxy_wake_seconds_sum")) - before.sum).toBeGreaterThanOrEqual(0.29);
    await sbx.kill();
  }, 60_000);

  test("a wake its node cannot do is a 502 that says so; the sandbox is still there for the next request", async () => {
    const created = await (await fetch(`${s.apiUrl}/sandboxes`, { method: "POST", headers: { "x-api-key": KEY_A, "content-type": "application/json" }, body: JSON.stringify({ templateID: "base", timeout: 3600 }) })).json();
    const id = created.sandboxID as string;
    await sleepIdle(id);
    await until(() => pausedInList(id), "the fleet view to show it asleep", 10_000, 50);
    const node = nodeOf(id);
    const envd = () => fetch(`${s.proxyUrl}/health`, { headers: { "e2b-sandbox-id": id, "e2b-sandbox-port": "49983", "x-access-token": created.envdAccessToken } });
    node.fail("ports", 500, { error: "cold boot failed" }, 1, claimOf(id)!.id);
    const failed = await envd();
    expect(failed.status).toBe(502);
    expect(await failed.json()).toEqual({ code: 502, message: "sandbox was asleep and its node could not wake it; retry later" });
    expect(await metric('sandbox_envd_proxy_wakes_total{outcome="failed"}')).toBeGreaterThanOrEqual(1);
    // The next request wakes it.
    const ok = await envd();
    expect(ok.status).toBeLessThan(300);
    expect(claimOf(id)!.state).toBe("running");
    await fetch(`${s.apiUrl}/sandboxes/${id}`, { method: "DELETE", headers: { "x-api-key": KEY_A } });
  }, 30_000);
});

describe("quotas", () => {
  test("a sandbox asleep by itself still holds its namespace's max-sandboxes slot until it is killed", async () => {
    const opts = sdkOpts(s, KEY_B);
    const sbx = await Sandbox.create("base", { ...opts, timeoutMs: 3_600_000 });
    await sleepIdle(sbx.sandboxId);
    expect((await sbx.getInfo()).state).toBe("paused");
    const over = await Sandbox.create("base", { ...opts, timeoutMs: 3_600_000 }).catch((e: unknown) => e);
    expect(over).toBeInstanceOf(RateLimitError);
    expect(String((over as Error).message)).toContain("namespace quota exceeded: 1 of 1 sandboxes held");
    await sbx.kill();
    const next = await Sandbox.create("base", { ...opts, timeoutMs: 3_600_000 });
    await next.kill();
  }, 30_000);
});

// The Python SDK 2.63 (sync client): mode "full" accepted, mode "filesystem" refused in each of its three places,
// and a self-slept sandbox read as paused then woken by commands.run. Two runs, so the test can let the node's time
// pass in between.
const PY_FORMS = [
  "import json",
  "import e2b",
  "from e2b import Sandbox",
  "out = {}",
  "sb = Sandbox.create('base', timeout=3600, lifecycle={'on_timeout': {'action': 'pause', 'mode': 'full'}, 'auto_resume': True})",
  "out['id'] = sb.sandbox_id",
  "def refused(f):",
  "    try:",
  "        f()",
  "        return 'accepted'",
  "    except Exception as e:",
  "        return type(e).__name__ + ': ' + str(e)",
  "out['create_fs'] = refused(lambda: Sandbox.create('base', lifecycle={'on_timeout': {'action': 'pause', 'mode': 'filesystem'}}))",
  "out['pause_fs'] = refused(lambda: sb.pause(mode='filesystem'))",
  "out['snapshot_fs'] = refused(lambda: sb.create_snapshot(mode='filesystem'))",
  "snap = sb.create_snapshot(mode='full')",
  "out['snapshot_full'] = snap.snapshot_id",
  `sb.commands.run(${JSON.stringify(COUNTER("/tmp/py-counter"))}, background=True).disconnect()`,
  "sb.files.write('/tmp/py-kept', 'kept by python')",
  "import time",
  "def count():",
  "    try:",
  "        return int(sb.files.read('/tmp/py-counter').strip() or 0)",
  "    except e2b.exceptions.FileNotFoundException:",
  "        return 0  # the counter has not written its first value yet",
  "for _ in range(200):",
  "    if count() > 3: break",
  "    time.sleep(0.05)",
  "print(json.dumps(out))",
].join("\n");

const PY_AFTER_SLEEP = [
  "import json, sys, time",
  "from e2b import Sandbox, SandboxQuery, SandboxState",
  "sid = sys.argv[1]",
  "out = {'info': Sandbox.get_info(sid).state.value}",
  "p = Sandbox.list(query=SandboxQuery(state=[SandboxState.PAUSED]))",
  "ids = []",
  "while p.has_next:",
  "    ids += [x.sandbox_id for x in p.next_items()]",
  "out['listed_paused'] = sid in ids",
  "sb = Sandbox.connect(sid)",
  "first = int(sb.commands.run('cat /tmp/py-counter').stdout.strip())",
  "later = first",
  "for _ in range(100):",
  "    later = int(sb.files.read('/tmp/py-counter').strip())",
  "    if later > first: break",
  "    time.sleep(0.05)",
  "out.update(first=first, later=later, kept=sb.files.read('/tmp/py-kept'), state=sb.get_info().state.value)",
  "sb.kill()",
  "print(json.dumps(out))",
].join("\n");

describe("the Python SDK's lifecycle forms", () => {
  test('mode "full" accepted; mode "filesystem" a 400 at create, pause and create_snapshot; a self-slept sandbox reads paused and wakes', async () => {
    const dir = mkdtempSync(join(tmpdir(), "e2b-pysleep-"));
    try {
      writeFileSync(join(dir, "forms.py"), PY_FORMS);
      writeFileSync(join(dir, "after.py"), PY_AFTER_SLEEP);
      const { python } = await ensurePythonSdk();
      const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("E2B_")));
      Object.assign(env, { E2B_API_KEY: KEY_A, E2B_API_URL: s.apiUrl, E2B_SANDBOX_URL: s.proxyUrl!, E2B_DOMAIN: DOMAIN, E2B_HTTP_VERSION: "1.1", PYTHONUNBUFFERED: "1" });
      const claimsBefore = s.cluster.nodes.flatMap((n) => n.claims()).length;
      const forms = await run([python, join(dir, "forms.py")], { env, timeoutMs: 60_000 });
      expect(forms.stderr).toBe("");
      const got = JSON.parse(forms.stdout.trim().split("\n").at(-1)!);
      expect(claimOf(got.id)!.onExpire).toBe("archive");
      expect(got.create_fs).toMatch(/400.*autoPauseMemory: false.*mode "filesystem".*not supported/);
      expect(got.pause_fs).toMatch(/400.*pause with memory: false.*mode "filesystem".*not supported/);
      expect(got.snapshot_fs).toMatch(/400.*snapshot with memory: false.*mode "filesystem".*not supported/);
      expect(got.snapshot_full).toMatch(/^ck_/);
      expect(s.cluster.nodes.flatMap((n) => n.claims()).length).toBe(claimsBefore + 1); // the refused create made none

      await sleepIdle(got.id);
      // The list reads the fleet view, which sees the sleep one poll later: wait for it before asking Python.
      await until(() => pausedInList(got.id), "the fleet view to show it paused", 10_000, 50);
      const after = await run([python, join(dir, "after.py"), got.id], { env, timeoutMs: 60_000 });
      expect(after.stderr).toBe("");
      const woke = JSON.parse(after.stdout.trim().split("\n").at(-1)!);
      expect(woke).toMatchObject({ info: "paused", listed_paused: true, kept: "kept by python", state: "running" });
      expect(woke.first).toBeGreaterThan(3);
      expect(woke.later).toBeGreaterThan(woke.first);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);
});
