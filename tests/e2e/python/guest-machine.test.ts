// The simulator's namespaced guest (issue 18) through the stock Python e2b SDK (the version pinned in
// tests/support/python/requirements.txt, sync client) against both stacks: the sandbox-e2b mesh (in process) and
// the full stack as `bash scripts/stack.sh` runs it. The scenario (tests/e2e/python/guest_machine.py) records each
// call; this file asserts on the record and makes the host-side checks (nothing a sandbox wrote in /tmp reaches the
// host's /tmp; the host's /tmp and /root files it planted are not seen inside).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, rmSync, writeFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { DOMAIN, KEY_A, startStack as startMesh, type Stack } from "#tests/integration/e2b/harness.ts";
import { startStack as startScriptStack, type RunningStack } from "#tests/e2e/stack/run-stack.ts";
import { E2B_DOMAIN as SCRIPT_DOMAIN } from "#scripts/stack/mesh.ts";
import { kubectlBinary } from "#tests/kube/peers.ts";
import { runPythonScenario, step, type PythonTarget, type ScenarioRecord } from "#tests/support/python/scenario.ts";
import { ensurePythonSdk } from "#tests/support/python/venv.ts";

// Without root the simulator's guests are process sandboxes (isolation.ts): none of this holds there.
const AS_ROOT = process.getuid?.() === 0;
const nsDescribe = AS_ROOT ? describe : describe.skip;

beforeAll(async () => {
  await ensurePythonSdk();
}, 300_000);

/** The value an ok step recorded; a step that failed throws with what the record says. */
function ok<T = unknown>(rec: ScenarioRecord, call: string): T {
  const s = step(rec, call);
  if (s.status !== "ok") throw new Error(`${call}: ${JSON.stringify(s)}`);
  return s.value as T;
}

async function scenario(target: PythonTarget): Promise<void> {
  const name = `py-guest-${randomBytes(6).toString("hex")}`;
  writeFileSync(`/tmp/${name}.host`, "host tmp");
  writeFileSync(`/root/${name}.host`, "host root");
  let rec: ScenarioRecord;
  try {
    rec = await runPythonScenario("guest_machine", target, { env: { SCENARIO_NAME: name }, timeoutMs: 180_000 });
  } finally {
    rmSync(`/tmp/${name}.host`, { force: true });
    rmSync(`/root/${name}.host`, { force: true });
  }
  expect(ok(rec, "pwd")).toBe("/home/user");
  expect(ok(rec, "pwd with cwd /tmp")).toBe("/tmp");
  expect(ok(rec, "id as the default user")).toBe("1000\nuser\n/home/user");
  expect(ok(rec, "id as root")).toBe("0\nroot\n/root");
  expect(ok(rec, "/tmp is each sandbox's own")).toEqual({ a_reads: "from-a\n", b_exists: false, b_command: "absent" });
  expect(existsSync(`/tmp/${name}`)).toBe(false);
  expect(ok(rec, "the host's /tmp and /root are unseen")).toEqual({ command: "done", files_tmp: false, files_root: false });
  const ports = ok<Record<string, string>>(rec, "two sandboxes serve port 3000, each get_host(3000) its own");
  expect([ports.a, ports.b, ports.a_links]).toEqual(["served by a", "served by b", "lo"]);
  expect(ports.a_host).not.toBe(ports.b_host);
  expect(ports.a_host).toStartWith("3000-");
  expect(ok(rec, "useradd inside, the host's /etc untouched")).toEqual({ id: "dave\n/home/dave" });
  expect((await Bun.file("/etc/passwd").text()).includes("dave:")).toBe(false);
  const sudo = ok<{ host_has_sudo: boolean; inside: string }>(rec, "sudo inside");
  expect(sudo.inside).toBe(sudo.host_has_sudo ? "0" : "no-sudo");
  const paused = ok<{ kept: string; before: number; after: number }>(rec, "pause and connect keep files and a running process");
  expect(paused.kept).toBe("kept");
  // The same counter went on from where it stood: it did not start over at 1.
  expect(paused.before).toBeGreaterThan(2);
  expect(paused.after).toBeGreaterThan(paused.before);
  const fork = ok<{ seen: string; parent_host: string; child: string; parent: string }>(rec, "a fork child sees its parent's files, then diverges");
  const [f, h, erin, childHost] = fork.seen.split("\n");
  expect([f, h, erin]).toEqual(["parent", "parent", "erin"]);
  expect(childHost).not.toBe(fork.parent_host);
  expect([fork.child, fork.parent]).toEqual(["child", "parent2"]);
  for (const s of rec.steps.filter((x) => x.call === "kill")) expect(s.status).toBe("ok");
}

nsDescribe("the sandbox-e2b mesh (in process)", () => {
  let s: Stack;
  beforeAll(async () => {
    s = await startMesh({ proxy: true, guestAgents: true, pools: ["img:1/none/small=3"] });
  }, 60_000);
  afterAll(async () => {
    await s?.stop();
  });
  test("the Python SDK sees a small machine per sandbox", async () => {
    expect(s.cluster.nodes.every((n) => n.node.guestHost!.isolation.mode === "namespaces")).toBe(true);
    await scenario({ apiKey: KEY_A, apiUrl: s.apiUrl, sandboxUrl: s.proxyUrl!, domain: DOMAIN });
  }, 200_000);
});

nsDescribe("the full stack (bash scripts/stack.sh)", () => {
  let stack: RunningStack;
  beforeAll(async () => {
    await kubectlBinary(); // the test peers, built once per machine; fails here rather than mid-test
    stack = await startScriptStack([], 600_000);
  }, 660_000);
  afterAll(async () => {
    await stack?.discard("python-guest-machine");
  });
  test("the Python SDK sees a small machine per sandbox", async () => {
    // stack.sh prints which guest it took; the namespaced one, as root.
    expect(stack.out.join("\n")).not.toMatch(/fallback|process sandbox/i);
    await scenario({ apiKey: stack.env.E2B_API_KEY!, apiUrl: stack.env.E2B_API_URL!, sandboxUrl: stack.env.E2B_SANDBOX_URL!, domain: SCRIPT_DOMAIN });
  }, 200_000);
});
