// Runs tests/e2e/errors/errors.py (and this folder's other record scripts) with the stock Python SDK (the cached venv
// of tests/support/python) against one stack, with only the environment a user's script has, and returns its record
// validated: {case: outcome}.
import { join } from "node:path";
import { z } from "zod";
import { run } from "#tests/support/run.ts";
import { ensurePythonSdk } from "#tests/support/python/venv.ts";

const Outcome = z.union([
  z.object({ raised: z.string(), mro: z.array(z.string()), message: z.string() }),
  z.object({ returned: z.union([z.boolean(), z.number(), z.string(), z.null()]) }),
]);
export type Outcome = z.infer<typeof Outcome>;
export type Outcomes = Record<string, Outcome>;

export interface ErrorsTarget {
  apiKey: string;
  apiUrl: string;
  sandboxUrl: string;
  domain: string;
  /** A key whose namespace may hold one sandbox (the quota case), another namespace's key, a 1-relay proxy. */
  quotaKey?: string;
  otherKey?: string;
  relayCapOne?: boolean;
}

export async function runErrorsScript(t: ErrorsTarget): Promise<Outcomes> {
  const env: Record<string, string> = { E2B_API_KEY: t.apiKey, E2B_API_URL: t.apiUrl, E2B_SANDBOX_URL: t.sandboxUrl, E2B_DOMAIN: t.domain };
  if (t.quotaKey) env.ERRORS_QUOTA_KEY = t.quotaKey;
  if (t.otherKey) env.ERRORS_OTHER_KEY = t.otherKey;
  if (t.relayCapOne) env.ERRORS_RELAY_CAP = "1";
  return runRecordScript("errors.py", env);
}

/**
 * Runs one of this folder's record scripts (errors.py, unserved.py) with the stock Python SDK and only `env` (none
 * of this process's E2B_* leak in: the record is the target's), and returns its record validated.
 */
export async function runRecordScript(script: string, vars: Record<string, string>): Promise<Outcomes> {
  const { python } = await ensurePythonSdk();
  const env: Record<string, string | undefined> = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("E2B_") && !k.startsWith("ERRORS_")));
  Object.assign(env, vars, { PYTHONUNBUFFERED: "1" });
  const r = await run([python, join(import.meta.dir, script)], { env, timeoutMs: 120_000 });
  const last = r.stdout.trim().split("\n").at(-1) ?? "";
  let parsed: unknown;
  try {
    parsed = JSON.parse(last);
  } catch {
    throw new Error(`${script} printed no JSON record (exit ${r.code}):\n${r.stdout.slice(-2000)}\n${r.stderr.slice(-4000)}`);
  }
  const out = z.record(z.string(), Outcome).parse(parsed);
  if (r.code !== 0) throw new Error(`${script} exited ${r.code}:\n${r.stderr.slice(-4000)}\nrecord: ${last.slice(0, 2000)}`);
  return out;
}

export function raised(out: Outcomes, name: string): { raised: string; mro: string[]; message: string } {
  const o = out[name];
  if (!o) throw new Error(`no case ${name} in the record (cases: ${Object.keys(out).join(", ")})`);
  if (!("raised" in o)) throw new Error(`${name} returned ${JSON.stringify(o.returned)} instead of raising`);
  return o;
}

export function returned(out: Outcomes, name: string): boolean | number | string | null {
  const o = out[name];
  if (!o || !("returned" in o)) throw new Error(`${name}: ${JSON.stringify(o)}`);
  return o.returned;
}
