// sandbox-e2b's startup checks as a real process: each misconfiguration exits non-zero before listening, with a
// message naming the flag or file (docs/e2b.md "Startup").
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startSandboxdSim, type SandboxdSim } from "#services/sandboxd-sim/sim.ts";
import { spawnE2b } from "./process.ts";

const ROOT = "root-startup";
let sim: SandboxdSim;
let dir: string;
beforeAll(async () => {
  sim = await startSandboxdSim({ rootToken: ROOT });
  dir = mkdtempSync(join(tmpdir(), "e2b-startup-"));
  writeFileSync(join(dir, "secret"), "s3cret\n");
  writeFileSync(join(dir, "empty"), "  \n");
  writeFileSync(join(dir, "keys"), "e2b_key team\n");
  writeFileSync(join(dir, "nokeys"), "# nothing\n\n");
  writeFileSync(join(dir, "badkeys"), "a b c\n");
  writeFileSync(join(dir, "huge"), "base img huge\n");
  writeFileSync(join(dir, "twice"), "base img\nbase other\n");
});
afterAll(async () => {
  await sim.stop();
  rmSync(dir, { recursive: true, force: true });
});

const base = () => [`--sandboxd-seeds=${sim.addr}`, `--sandboxd-token=${ROOT}`, "--e2b-bind-address=127.0.0.1:0", "--e2b-domain=sb.test", `--e2b-envd-secret-file=${join(dir, "secret")}`, `--e2b-api-key-file=${join(dir, "keys")}`];
const without = (flag: string, args = base()) => args.filter((a) => !a.startsWith(`--${flag}=`));

async function fails(args: string[], expected: string, code = 1): Promise<void> {
  const child = spawnE2b(args);
  const exit = await child.exited;
  expect(exit).toBe(code);
  // Log lines are JSON: compare against their unescaped text.
  expect(child.output().replace(/\\"/g, '"')).toContain(expected);
}

describe("startup checks (exit non-zero before listening)", () => {
  test("3: no key file and no --e2b-allow-anonymous", () => fails(without("e2b-api-key-file"), "no API key configured"));
  test("a key file with no entries and no --e2b-allow-anonymous", () => fails([...without("e2b-api-key-file"), `--e2b-api-key-file=${join(dir, "nokeys")}`], "no API key configured"));
  test("a key line with three fields", () => fails([...without("e2b-api-key-file"), `--e2b-api-key-file=${join(dir, "badkeys")}`], "malformed entry on line 1"));
  test("6: blank --e2b-domain", () => fails([...without("e2b-domain"), "--e2b-domain=  "], "no domain configured"));
  test("6: missing envd secret flag", () => fails(without("e2b-envd-secret-file"), "--e2b-envd-secret-file is required"));
  test("6: empty envd secret file", () => fails([...without("e2b-envd-secret-file"), `--e2b-envd-secret-file=${join(dir, "empty")}`], "is empty"));
  test("unreadable envd secret file", () => fails([...without("e2b-envd-secret-file"), `--e2b-envd-secret-file=${join(dir, "missing")}`], "cannot read"));
  test("7: alias with size huge", () => fails([...base(), `--e2b-template-alias-file=${join(dir, "huge")}`], 'unknown size "huge"'));
  test("7: alias listed twice", () => fails([...base(), `--e2b-template-alias-file=${join(dir, "twice")}`], 'duplicate alias "base"'));
  test("--e2b-envd-version that is not a version is a usage error (exit 2)", () => fails([...base(), "--e2b-envd-version=latest"], "e2b-envd-version", 2));
  test("no seed answers", () => fails([...without("sandboxd-seeds"), "--sandboxd-seeds=127.0.0.1:1"], "no sandboxd seed answered"));
  test("a seed refuses the token", () => fails([...without("sandboxd-token"), "--sandboxd-token=wrong"], "refused the root token"));
  test("half a proxy TLS pair", () => fails([...base(), "--envd-proxy-bind-address=127.0.0.1:0", "--envd-proxy-tls-cert-file=/x.pem"], "must be set together"));

  test("4: anonymous mode serves without a key and claims in --e2b-namespace", async () => {
    sim.setWarm("img/none/small", 1);
    sim.attachGuest("*", 49983, 1); // nothing listens: /init will fail, but the claim_ref is what we check
    const child = spawnE2b([...without("e2b-api-key-file"), "--e2b-allow-anonymous", "--e2b-namespace=anon"]);
    try {
      const line = await child.waitFor("e2b surface listening");
      const r = await fetch(`http://127.0.0.1:${line.port}/health`);
      expect(r.status).toBe(204);
      await fetch(`http://127.0.0.1:${line.port}/v2/sandboxes`, { method: "POST", body: JSON.stringify({ templateID: "img" }) });
      const claims = sim.requests.filter((e) => e.route === "claim");
      expect((claims.at(-1)!.body as { claim_ref: string }).claim_ref).toMatch(/^anon\/e2b-/);
    } finally {
      await child.stop();
    }
  });
});
