// Errors as the stock Python SDK (e2b 2.63, sync, its default HTTP version) sees them (issue 20 item 7): every 429
// is its RateLimitException with our message, unknown, other-tenant and killed ids its SandboxNotFoundException (or
// kill() -> False), a gone sandbox on the data plane its SandboxNotRunningException (which it raises only when the
// proxy's 502 says "was not found", as e2b cloud's does), and a paused sandbox resumes on traffic. The cases run in
// tests/e2e/errors/errors.py against sandbox-e2b with its in-process envd proxy and the simulator's guest agents.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { join } from "node:path";
import { z } from "zod";
import { DOMAIN, KEY_A, KEY_B, startStack, type Stack } from "#tests/integration/e2b/harness.ts";
import { run } from "#tests/support/run.ts";
import { ensurePythonSdk } from "#tests/support/python/venv.ts";

const KEY_Q = "e2b_qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqq";

const Outcome = z.union([
  z.object({ raised: z.string(), mro: z.array(z.string()), message: z.string() }),
  z.object({ returned: z.union([z.boolean(), z.number(), z.string(), z.null()]) }),
]);
type Outcome = z.infer<typeof Outcome>;

let s: Stack;
let out: Record<string, Outcome>;

beforeAll(async () => {
  const [{ python }, stack] = await Promise.all([
    ensurePythonSdk(),
    startStack({
      proxy: true,
      guestAgents: true,
      pools: ["img:1/none/small=6"],
      keys: `${KEY_A} team-a\n${KEY_B} team-b\n${KEY_Q} team-q max-sandboxes=1\n`,
      extraFlags: ["--envd-proxy-max-relays-per-sandbox=1"],
    }),
  ]);
  s = stack;
  // Only what a user's shell would carry: none of this process's E2B_* leak in.
  const env: Record<string, string | undefined> = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("E2B_")));
  Object.assign(env, {
    E2B_API_KEY: KEY_A,
    E2B_API_URL: s.apiUrl,
    E2B_SANDBOX_URL: s.proxyUrl,
    E2B_DOMAIN: DOMAIN,
    ERRORS_QUOTA_KEY: KEY_Q,
    ERRORS_OTHER_KEY: KEY_B,
    PYTHONUNBUFFERED: "1",
  });
  const r = await run([python, join(import.meta.dir, "errors.py")], { env, timeoutMs: 120_000 });
  const last = r.stdout.trim().split("\n").at(-1) ?? "";
  let parsed: unknown;
  try {
    parsed = JSON.parse(last);
  } catch {
    throw new Error(`errors.py printed no JSON record (exit ${r.code}):\n${r.stdout.slice(-2000)}\n${r.stderr.slice(-4000)}`);
  }
  out = z.record(z.string(), Outcome).parse(parsed);
  if (r.code !== 0) throw new Error(`errors.py exited ${r.code}:\n${r.stderr.slice(-4000)}\nrecord: ${last.slice(0, 2000)}`);
}, 300_000);
afterAll(() => s?.stop());

function raised(name: string): { raised: string; mro: string[]; message: string } {
  const o = out[name];
  if (!o) throw new Error(`no case ${name} in the record (cases: ${Object.keys(out).join(", ")})`);
  if (!("raised" in o)) throw new Error(`${name} returned ${JSON.stringify(o.returned)} instead of raising`);
  return o;
}
const returned = (name: string) => {
  const o = out[name];
  if (!o || !("returned" in o)) throw new Error(`${name}: ${JSON.stringify(o)}`);
  return o.returned;
};

test("429 from the namespace quota: RateLimitException with our message", () => {
  const e = raised("quota_create");
  expect(e.raised).toBe("RateLimitException");
  expect(e.message).toContain("max-sandboxes");
});

test("429 from the relay's per-sandbox cap on files.read: RateLimitException with our message", () => {
  const e = raised("relay_cap_files_read");
  expect(e.raised).toBe("RateLimitException");
  expect(e.message).toContain("too many concurrent requests to this sandbox (limit 1)");
});

test("unknown ids: get_info, set_timeout, connect, pause raise SandboxNotFoundException; kill returns False", () => {
  for (const c of ["unknown_get_info", "unknown_set_timeout", "unknown_connect", "unknown_pause"]) {
    expect(raised(c).mro, c).toContain("SandboxNotFoundException");
  }
  expect(returned("unknown_kill")).toBe(false);
});

test("another tenant's id: SandboxNotFoundException, kill False", () => {
  expect(raised("other_tenant_get_info").mro).toContain("SandboxNotFoundException");
  expect(returned("other_tenant_kill")).toBe(false);
});

test("a killed sandbox: REST calls not found; commands.run and files.read SandboxNotRunningException (the proxy said 'was not found'); is_running False", () => {
  for (const c of ["killed_get_info", "killed_set_timeout", "killed_connect"]) expect(raised(c).mro, c).toContain("SandboxNotFoundException");
  expect(returned("killed_kill")).toBe(false);
  for (const c of ["killed_commands_run", "killed_files_read"]) {
    const e = raised(c);
    // SandboxUnreachableException ("state unknown") is what a 502 without "was not found" gets.
    expect(e.raised, `${c}: ${e.message}`).toBe("SandboxNotRunningException");
    expect(e.message).toContain("sandbox was not found");
  }
  expect(returned("killed_is_running")).toBe(false);
});

test("a paused sandbox resumes on commands.run (autoResume)", () => {
  expect(returned("paused_state_before")).toBe("paused");
  expect(returned("paused_commands_run")).toBe("resumed\n");
  expect(returned("paused_state_after")).toBe("running");
});
