// The bridge from a bun test to the stock Python e2b SDK: runs a scenario script (tests/e2e/python/<name>.py) in the
// cached venv with a stack's connection settings as the environment a user's script would have, and returns the
// structured record its last stdout line carries, validated, for the test to assert on.
import { join } from "node:path";
import { z } from "zod";
import { run } from "#tests/support/run.ts";
import { ensurePythonSdk } from "./venv.ts";

const scripts = join(import.meta.dir, "../../e2e/python");

/** What a user's script sets to reach a stack (the Python SDK reads these; see ConnectionConfig in e2b 2.63). */
export interface PythonTarget {
  apiKey: string;
  /** E2B_API_URL: deprecated in 2.63 but still honoured (ConnectionConfig.api_url). */
  apiUrl: string;
  /** E2B_SANDBOX_URL: every envd call goes here with E2b-Sandbox-Id/-Port headers. */
  sandboxUrl: string;
  domain: string;
  /** PEM file the SDK's transport trusts (SSL_CERT_FILE), for a target behind a TLS edge with a test CA. */
  caFile?: string;
}

export interface ScenarioOptions {
  /** argv after the script path. */
  args?: string[];
  /** E2B_HTTP_VERSION; unset leaves the SDK's default ("2"). */
  httpVersion?: "1.1" | "2";
  /** Extra environment (SCENARIO_TEMPLATE, ...). */
  env?: Record<string, string>;
  timeoutMs?: number;
}

const Step = z.discriminatedUnion("status", [
  z.object({ call: z.string(), status: z.literal("ok"), value: z.unknown(), ms: z.number() }),
  z.object({ call: z.string(), status: z.literal("error"), error: z.object({ type: z.string(), message: z.string(), where: z.string() }), ms: z.number() }),
  z.object({ call: z.string(), status: z.literal("skipped"), ms: z.number() }),
]);
export type ScenarioStep = z.infer<typeof Step>;

const Record = z.object({
  client: z.string(),
  version: z.string(),
  mode: z.string(),
  http_version: z.string(),
  steps: z.array(Step),
});
export type ScenarioRecord = z.infer<typeof Record> & {
  /**
   * The async client's Rust transport (pyqwest) now and then aborts the interpreter at exit, after the script's last
   * line ran, with no Python frame on the stack: seen on plain http and TLS alike, on REST-only scripts too (1 in
   * 8 to 1 in 30 runs under load, none in 40 unloaded). Not a server answer, so the record stands and the abort is noted.
   */
  abortedAtExit: boolean;
};

export async function runPythonScenario(name: string, target: PythonTarget, o: ScenarioOptions = {}): Promise<ScenarioRecord> {
  const { python } = await ensurePythonSdk();
  // Only what a user's shell would carry: none of this process's E2B_* leak in, so the record is the target's.
  const env: Record<string, string | undefined> = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("E2B_")));
  // PYTHONFAULTHANDLER: an abort names the Python frame it happened in, or says there was none (interpreter exit).
  Object.assign(env, { E2B_API_KEY: target.apiKey, E2B_API_URL: target.apiUrl, E2B_SANDBOX_URL: target.sandboxUrl, E2B_DOMAIN: target.domain, PYTHONUNBUFFERED: "1", PYTHONFAULTHANDLER: "1" }, o.env);
  if (o.httpVersion) env.E2B_HTTP_VERSION = o.httpVersion;
  if (target.caFile) env.SSL_CERT_FILE = target.caFile;
  const script = join(scripts, `${name}.py`);
  const r = await run([python, script, ...(o.args ?? [])], { env, timeoutMs: o.timeoutMs ?? 120_000 });
  const last = r.stdout.trim().split("\n").at(-1) ?? "";
  let parsed: unknown;
  try {
    parsed = JSON.parse(last);
  } catch {
    throw new Error(`${name}.py ${(o.args ?? []).join(" ")} printed no JSON record (exit ${r.code}):\n${r.stdout.slice(-2000)}\n${r.stderr.slice(-4000)}`);
  }
  const rec = Record.safeParse(parsed);
  if (!rec.success) throw new Error(`${name}.py printed a record of the wrong shape: ${rec.error.message}\n${last.slice(0, 2000)}`);
  const abortedAtExit = r.code === 134 && /Fatal Python error: Aborted/.test(r.stderr) && /<no Python frame>/.test(r.stderr) && !/File "/.test(r.stderr);
  if (r.code !== 0 && !abortedAtExit) throw new Error(`${name}.py exited ${r.code} after its record:\n${r.stderr.slice(-4000)}`);
  return { ...rec.data, abortedAtExit };
}

/** The step named `call`; throws naming the calls there are when it is missing. */
export function step(rec: ScenarioRecord, call: string): ScenarioStep {
  const s = rec.steps.find((x) => x.call === call);
  if (!s) throw new Error(`no step ${call} in the record (steps: ${rec.steps.map((x) => x.call).join(", ")})`);
  return s;
}
