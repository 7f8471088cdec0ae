// Errors as the stock Python SDK (e2b 2.63, sync, its default HTTP version) sees them (issue 20 item 7): every 429
// is its RateLimitException with our message, unknown, other-tenant and killed ids its SandboxNotFoundException (or
// kill() -> False), a gone sandbox on the data plane its SandboxNotRunningException (which it raises only when the
// proxy's 502 says "was not found", as e2b cloud's does), and a paused sandbox resumes on traffic. The cases run in
// tests/e2e/errors/errors.py against sandbox-e2b with its in-process envd proxy and the simulator's guest agents
// (the full stack: full-stack.test.ts).
import { afterAll, beforeAll, expect, test } from "bun:test";
import { DOMAIN, KEY_A, KEY_B, startStack, type Stack } from "#tests/integration/e2b/harness.ts";
import { ensurePythonSdk } from "#tests/support/python/venv.ts";
import { raised, returned, runErrorsScript, type Outcomes } from "./python-run.ts";
import { ErrorRows } from "./matrix-rows.ts";

const V = "e2b (Python) 2.63, sync";
const rows = new ErrorRows(
  "errors-python-mesh",
  "Errors: e2b (Python) 2.63 on sandbox-e2b",
  "What the stock Python SDK (sync, its default HTTP version) raises for each error answer (issue 20 item 7; docs/e2b.md " +
    "\"Errors as the SDKs see them\"), each judged against what it raises against e2b cloud. Suite: " +
    "tests/e2e/errors/python.test.ts running tests/e2e/errors/errors.py.",
  "sandbox-e2b mesh (tests/integration/e2b/harness.ts, simulator guest agents)",
  6,
);

const KEY_Q = "e2b_qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqq";

let s: Stack;
let out: Outcomes;

beforeAll(async () => {
  [, s] = await Promise.all([
    ensurePythonSdk(),
    startStack({
      proxy: true,
      guestAgents: true,
      pools: ["img:1/none/small=6"],
      keys: `${KEY_A} team-a\n${KEY_B} team-b\n${KEY_Q} team-q max-sandboxes=1\n`,
      extraFlags: ["--envd-proxy-max-relays-per-sandbox=1"],
    }),
  ]);
  out = await runErrorsScript({ apiKey: KEY_A, apiUrl: s.apiUrl, sandboxUrl: s.proxyUrl!, domain: DOMAIN, quotaKey: KEY_Q, otherKey: KEY_B, relayCapOne: true });
}, 300_000);
afterAll(async () => {
  await s?.stop();
  rows.write();
});

test("429 from the namespace quota: RateLimitException with our message", () => {
  const e = raised(out, "quota_create");
  expect(e.raised).toBe("RateLimitException");
  expect(e.message).toContain("max-sandboxes");
  rows.ok("quota", V, "Sandbox.create past max-sandboxes -> RateLimitException", "");
});

test("429 from the relay's per-sandbox cap on files.read: RateLimitException with our message", () => {
  const e = raised(out, "relay_cap_files_read");
  expect(e.raised).toBe("RateLimitException");
  expect(e.message).toContain("too many concurrent requests to this sandbox (limit 1)");
  rows.ok("relaycap", V, "files.read past the relay's per-sandbox cap -> RateLimitException", "");
});

test("unknown ids: get_info, set_timeout, connect, pause raise SandboxNotFoundException; kill returns False", () => {
  for (const c of ["unknown_get_info", "unknown_set_timeout", "unknown_connect", "unknown_pause"]) {
    expect(raised(out, c).mro, c).toContain("SandboxNotFoundException");
  }
  expect(returned(out, "unknown_kill")).toBe(false);
  rows.ok("unknown", V, "get_info / set_timeout / connect / pause of an unknown id -> SandboxNotFoundException; kill -> False", "");
});

test("another tenant's id: SandboxNotFoundException, kill False", () => {
  expect(raised(out, "other_tenant_get_info").mro).toContain("SandboxNotFoundException");
  expect(returned(out, "other_tenant_kill")).toBe(false);
  rows.ok("tenant", V, "get_info / kill of another namespace's id -> SandboxNotFoundException / False", "");
});

test("a killed sandbox: REST calls not found; commands.run and files.read SandboxNotRunningException (the proxy said 'was not found'); is_running False", () => {
  for (const c of ["killed_get_info", "killed_set_timeout", "killed_connect"]) expect(raised(out, c).mro, c).toContain("SandboxNotFoundException");
  expect(returned(out, "killed_kill")).toBe(false);
  for (const c of ["killed_commands_run", "killed_files_read"]) {
    const e = raised(out, c);
    // SandboxUnreachableException ("state unknown") is what a 502 without "was not found" gets.
    expect(e.raised, `${c}: ${e.message}`).toBe("SandboxNotRunningException");
    expect(e.message).toContain("sandbox was not found");
  }
  expect(returned(out, "killed_is_running")).toBe(false);
  rows.ok("killed", V, "killed sandbox: REST -> SandboxNotFoundException; commands.run / files.read -> SandboxNotRunningException; is_running -> False", "");
});

test("a paused sandbox resumes on commands.run (autoResume)", () => {
  expect(returned(out, "paused_state_before")).toBe("paused");
  expect(returned(out, "paused_commands_run")).toBe("resumed\n");
  expect(returned(out, "paused_state_after")).toBe("running");
  rows.ok("paused", V, "commands.run on a paused autoResume sandbox -> resumes it", "");
});
