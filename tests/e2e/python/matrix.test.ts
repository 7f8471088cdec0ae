// The stock Python e2b SDK (PyPI, the version pinned in tests/support/python/requirements.txt), sync and async, with
// its default HTTP version and with E2B_HTTP_VERSION=1.1, against both stacks: the sandbox-e2b mesh (in process, a
// guest agent per sandbox speaking envd's protocol) and the full stack as `bash scripts/stack.sh` runs it (a real
// kube-apiserver, sandbox-apiserver, sandbox-envd-proxy). Each variant lives one sandbox's life
// (tests/e2e/python/lifecycle.py), then makes every other sandbox call (tests/e2e/python/calls.py); every call is
// judged against e2b cloud (tests/support/python/verdicts.ts) and the verdicts become docs/sdk-matrix.md.
// A wire tap in front of each URL records which HTTP version the SDK really spoke.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { DOMAIN, KEY_A, startStack as startMesh, type Stack } from "#tests/integration/e2b/harness.ts";
import { REPO, startStack as startScriptStack, type RunningStack } from "#tests/e2e/stack/run-stack.ts";
import { E2B_DOMAIN as SCRIPT_DOMAIN } from "#scripts/stack/mesh.ts";
import { kubectlBinary } from "#tests/kube/peers.ts";
import { run } from "#tests/support/run.ts";
import { renderSection, writeSection, type Cell } from "#tests/support/python/matrix.ts";
import { cellsFor } from "#tests/support/python/verdicts.ts";
import { runPythonScenario, step, type PythonTarget } from "#tests/support/python/scenario.ts";
import { ensurePythonSdk, pinnedE2bVersion } from "#tests/support/python/venv.ts";
import { startWireTap, type WireTap } from "#tests/support/python/wire-tap.ts";

const MESH = "sandbox-e2b mesh (tests/integration/e2b/harness.ts, a guest agent per sandbox)";
const FULL = "full stack (bash scripts/stack.sh: kube-apiserver, sandbox-apiserver, sandbox-envd-proxy)";
const VARIANTS = [
  { mode: "sync", http: "2" },
  { mode: "sync", http: "1.1" },
  { mode: "async", http: "2" },
  { mode: "async", http: "1.1" },
] as const;
const label = (v: (typeof VARIANTS)[number]) => `${v.mode}, HTTP/${v.http}${v.http === "2" ? " (default)" : " (E2B_HTTP_VERSION)"}`;

const cells: Cell[] = [];

beforeAll(async () => {
  const sdk = await ensurePythonSdk();
  console.log(`python e2b ${sdk.e2bVersion}: ${sdk.built ? "installed" : "cached"} in ${sdk.seconds.toFixed(1)} s`);
}, 300_000);

afterAll(() => {
  // Only a run of every stack and variant regenerates the doc: a filtered run must not erase the other stack's table.
  const ran = new Set(cells.map((c) => `${c.stack}/${c.variant}`));
  if (ran.size !== 2 * VARIANTS.length) {
    console.log(`docs/sdk-matrix.md not regenerated: ${ran.size} of ${2 * VARIANTS.length} stack × variant runs finished`);
    return;
  }
  const intro = [
    `The stock Python SDK \`e2b\` ${pinnedE2bVersion()} from PyPI (every dependency pinned: tests/support/python/requirements.txt),`,
    "sync (`Sandbox`) and async (`AsyncSandbox`), with the SDK's default HTTP version and with `E2B_HTTP_VERSION=1.1`,",
    "pointed at each stack by `E2B_API_KEY`, `E2B_API_URL`, `E2B_SANDBOX_URL` and `E2B_DOMAIN` (2.63 deprecates the two URLs",
    "but still honours them; its only other scheme is `https://api.<domain>`). Suite: tests/e2e/python/matrix.test.ts,",
    "scenarios: tests/e2e/python/lifecycle.py and calls.py. Regenerate with `bun test tests/e2e/python/matrix.test.ts`.",
  ].join("\n");
  writeSection(join(REPO, "docs", "sdk-matrix.md"), "e2b-python", renderSection(`e2b (Python) ${pinnedE2bVersion()}`, intro, [MESH, FULL], cells));
});

test("the SDK venv is cached: a second ensure makes nothing and takes well under a second or two", async () => {
  const started = performance.now();
  const r = await run(["bun", "run", "tests/support/python/venv.ts", "ensure"], { cwd: REPO });
  const seconds = (performance.now() - started) / 1000;
  expect(r.code).toBe(0);
  expect(r.stderr).toContain(`python e2b ${pinnedE2bVersion()}: cached`);
  console.log(`second ensure: ${seconds.toFixed(2)} s`);
  expect(seconds).toBeLessThan(5);
});

interface Under {
  target: PythonTarget;
  api: WireTap;
  sandbox: WireTap;
}

function matrix(stackName: string, under: () => Under) {
  for (const v of VARIANTS) {
    test(`${label(v)}: lifecycle (create, run, files, set_timeout, list, kill) and every other sandbox call`, async () => {
      const u = under();
      const [a0, s0] = [u.api.connections().length, u.sandbox.connections().length];
      const opts = { args: [v.mode], ...(v.http === "1.1" ? { httpVersion: "1.1" as const } : {}) };
      const life = await runPythonScenario("lifecycle", u.target, opts);
      const calls = await runPythonScenario("calls", u.target, opts);
      const seen = [...u.api.connections().slice(a0), ...u.sandbox.connections().slice(s0)];
      const mine = cellsFor(stackName, label(v), { ...life, steps: [...life.steps, ...calls.steps] }, { requested: v.http, seen });
      cells.push(...mine);
      // This run's figures (lag, connection counts) go to the log; the doc keeps verdicts and reasons.
      for (const c of mine.filter((x) => x.verdict !== "ok")) console.log(`${stackName.split(" (")[0]}, ${label(v)}, ${c.call}: ${c.verdict}: ${c.detail}`);
      for (const rec of [life, calls]) expect([rec.version, rec.mode, rec.http_version]).toEqual([pinnedE2bVersion(), v.mode, v.http]);
      expect(step(life, "commands.run")).toMatchObject({ status: "ok", value: { stdout: "hello\n", exit_code: 0 } });
      expect(step(life, "files.read")).toMatchObject({ status: "ok", value: "written by the Python SDK" });
      expect(step(life, "kill")).toMatchObject({ status: "ok", value: true });
      expect(step(calls, "Sandbox.connect (resume)")).toMatchObject({ status: "ok", value: { state: "running", kept: "kept\n" } });
      // Every call is either e2b cloud's behaviour or a difference the matrix names with its reason.
      expect(mine.filter((c) => c.verdict === "fails").map((c) => `${c.call}: ${c.detail}`)).toEqual([]);
      expect(mine.map((c) => c.call)).toContain("HTTP version on the wire");
    }, 240_000);
  }
}

describe(MESH, () => {
  let s: Stack;
  let u: Under;
  beforeAll(async () => {
    s = await startMesh({ proxy: true, guestAgents: true });
    const [api, sandbox] = await Promise.all([startWireTap(s.apiUrl), startWireTap(s.proxyUrl!)]);
    u = { api, sandbox, target: { apiKey: KEY_A, apiUrl: api.url, sandboxUrl: sandbox.url, domain: DOMAIN } };
  }, 60_000);
  afterAll(async () => {
    await u?.api.stop();
    await u?.sandbox.stop();
    await s?.stop();
  });
  matrix(MESH, () => u);
});

describe(FULL, () => {
  let stack: RunningStack;
  let u: Under;
  beforeAll(async () => {
    await kubectlBinary(); // the test peers, built once per machine; fails here rather than mid-test
    stack = await startScriptStack([], 600_000);
    console.log(`full stack ready in ${stack.readySeconds.toFixed(1)} s`);
    const [api, sandbox] = await Promise.all([startWireTap(stack.env.E2B_API_URL!), startWireTap(stack.env.E2B_SANDBOX_URL!)]);
    u = { api, sandbox, target: { apiKey: stack.env.E2B_API_KEY!, apiUrl: api.url, sandboxUrl: sandbox.url, domain: SCRIPT_DOMAIN } };
  }, 660_000);
  afterAll(async () => {
    await u?.api.stop();
    await u?.sandbox.stop();
    await stack?.stop();
    if (stack) rmSync(stack.stateDir, { recursive: true, force: true });
  });
  matrix(FULL, () => u);
});
