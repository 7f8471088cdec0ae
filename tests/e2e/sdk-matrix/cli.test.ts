// The stock CLI `@e2b/cli` (package.json) against both stacks, pointed at each by E2B_API_KEY, E2B_API_URL,
// E2B_SANDBOX_URL and E2B_DOMAIN in a fresh HOME (no login, no config file): every `e2b sandbox` command that works
// with an API key, and the `e2b template` commands that do (list, create from a Dockerfile, publish, unpublish,
// delete; both stacks serve the build API). Each command's output is judged as e2b cloud's would be; the verdicts
// become the "@e2b/cli" section of docs/sdk-matrix.md.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Sandbox } from "e2b";
import pkg from "@e2b/cli/package.json" with { type: "json" };
import { REPO } from "#tests/e2e/stack/run-stack.ts";
import { run, type RunResult } from "#tests/support/run.ts";
import { differs, expectThat, fails, ok, Recorder, type Judgement } from "./recorder.ts";
import { onBothStacks, sdkOpts, STACKS, type Target } from "./stacks.ts";

const VARIANT = `@e2b/cli ${pkg.version}`;
const rec = new Recorder();
const CLI = join(REPO, "node_modules", "@e2b", "cli", "dist", "index.js");
let home: string;
/** A build context for `e2b template create`: an e2b.Dockerfile from the stacks' `base`. */
let ctx: string;
/** The template the CLI builds, publishes, unpublishes and deletes. */
const TEMPLATE = "cli-matrix";

beforeAll(() => {
  home = mkdtempSync(join(tmpdir(), "e2b-cli-home-"));
  ctx = join(home, "ctx");
  mkdirSync(ctx);
  writeFileSync(join(ctx, "e2b.Dockerfile"), "FROM base\nRUN echo cli-matrix > /home/user/marker\n");
});

afterAll(() => {
  rmSync(home, { recursive: true, force: true });
  rec.write(
    "e2b-cli",
    `@e2b/cli ${pkg.version}`,
    [
      `The stock CLI \`@e2b/cli\` ${pkg.version} from npm, run with node in a fresh HOME (no \`e2b auth login\`), pointed at each stack`,
      "by `E2B_API_KEY`, `E2B_API_URL`, `E2B_SANDBOX_URL` and `E2B_DOMAIN`. Suite: tests/e2e/sdk-matrix/cli.test.ts.",
      "`sandbox connect` and `sandbox create` open an interactive terminal and are not run. `template create` builds",
      "from an e2b.Dockerfile through the build API (the mesh runs with `--e2b-builds`, as the full stack does);",
      "`template init` and `migrate` only write local files; the hidden, deprecated `template build` calls e2b's v1",
      "build routes, which answer 501 naming the route and the v3 build to use instead (docs/e2b-routes.md).",
    ].join("\n"),
    STACKS,
  );
});

function cli(t: Target, args: string[], timeoutMs = 60_000): Promise<RunResult> {
  const env = { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: home, E2B_API_KEY: t.apiKey, E2B_API_URL: t.apiUrl, E2B_SANDBOX_URL: t.sandboxUrl, E2B_DOMAIN: t.domain, NO_COLOR: "1", CI: "1" };
  return run(["node", CLI, ...args], { env, timeoutMs });
}

/** The status of the stack's `GET /templates/{name}` (200: a built template of the key's namespace). */
async function templateStatus(t: Target, name: string): Promise<number> {
  const r = await fetch(`${t.apiUrl}/templates/${name}`, { headers: { "x-api-key": t.apiKey } });
  await r.body?.cancel();
  return r.status;
}

/** Why publish/unpublish differ from e2b cloud (docs/e2b-routes.md "Template visibility"). */
const VISIBILITY =
  "accepted and changes nothing: a built template is usable by its own namespace only (what an unpublished template is on e2b cloud), no namespace can publish one to the others, and the template list reports every template as public";

const said = (r: RunResult) => `exit ${r.code}: ${(r.stdout + r.stderr).trim().slice(0, 300)}`;
function jsonOf(r: RunResult): unknown {
  const text = r.stdout.trim();
  const start = text.search(/[[{]/);
  return start >= 0 ? JSON.parse(text.slice(start)) : undefined;
}
const idsIn = (v: unknown): string[] => (Array.isArray(v) ? v.map((x) => String((x as { sandboxID?: string; sandboxId?: string }).sandboxID ?? (x as { sandboxId?: string }).sandboxId)) : []);

onBothStacks((target) => {
  test(`${VARIANT}: sandbox list/info/metrics/exec/pause/resume/logs/kill, template list`, async () => {
    const t: Target = target();
    const c = (call: string, fn: () => Promise<Judgement>) => rec.cell(t.stack, VARIANT, call, fn);
    const sb = await Sandbox.create("base", { ...sdkOpts(t), metadata: { suite: "cli-matrix" } });
    try {
      await c("e2b sandbox list -f json", async () => {
        const r = await cli(t, ["sandbox", "list", "-f", "json"]);
        if (r.code !== 0) return fails(said(r));
        return idsIn(jsonOf(r)).includes(sb.sandboxId) ? ok() : differs("the list shows a new sandbox once the fleet view has seen it (issue 20 part 2)", said(r));
      });
      await c("e2b sandbox list -m suite=cli-matrix -t base -o asc --started-after", async () => {
        const since = new Date(Date.now() - 3_600_000).toISOString();
        const r = await cli(t, ["sandbox", "list", "-f", "json", "-m", "suite=cli-matrix", "-t", "base", "-o", "asc", "--started-after", since]);
        const other = await cli(t, ["sandbox", "list", "-f", "json", "-m", "suite=no-such"]);
        return expectThat(r.code === 0 && idsIn(jsonOf(r)).includes(sb.sandboxId) && idsIn(jsonOf(other)).length === 0, said(r));
      });
      await c("e2b sandbox info", async () => {
        const r = await cli(t, ["sandbox", "info", sb.sandboxId, "-f", "json"]);
        return expectThat(r.code === 0 && r.stdout.includes(sb.sandboxId), said(r));
      });
      await c("e2b sandbox metrics", async () => {
        const r = await cli(t, ["sandbox", "metrics", sb.sandboxId, "--format", "json"]);
        return expectThat(r.code === 0, said(r));
      });
      await c("e2b sandbox exec", async () => {
        const r = await cli(t, ["sandbox", "exec", sb.sandboxId, "echo", "from-cli"]);
        return expectThat(r.code === 0 && r.stdout.includes("from-cli"), said(r));
      });
      await c("e2b sandbox logs", async () => {
        const r = await cli(t, ["sandbox", "logs", sb.sandboxId, "--format", "json"]);
        return r.code === 0 ? differs("no log storage: the logs endpoints answer an empty list for a visible sandbox", said(r)) : fails(said(r));
      });
      await c("e2b sandbox pause", async () => {
        const r = await cli(t, ["sandbox", "pause", sb.sandboxId]);
        return expectThat(r.code === 0 && (await Sandbox.getInfo(sb.sandboxId, sdkOpts(t))).state === "paused", said(r));
      });
      await c("e2b sandbox resume", async () => {
        const r = await cli(t, ["sandbox", "resume", sb.sandboxId]);
        return expectThat(r.code === 0 && (await Sandbox.getInfo(sb.sandboxId, sdkOpts(t))).state === "running", said(r));
      });
      await c("e2b sandbox kill", async () => {
        const r = await cli(t, ["sandbox", "kill", sb.sandboxId]);
        return expectThat(r.code === 0 && !(await sb.isRunning()), said(r));
      });
      await c("e2b template list", async () => {
        const r = await cli(t, ["template", "list", "-f", "json"]);
        if (r.code === 0) return expectThat(r.stdout.includes("base"), said(r));
        return differs("`e2b template list` needs a dashboard access token (E2B_ACCESS_TOKEN from `e2b auth login`) and a team; the surface authenticates API keys only", said(r));
      });
    } finally {
      await Sandbox.kill(sb.sandboxId, sdkOpts(t)).catch(() => false);
    }
    expect(rec.failures(t.stack)).toEqual([]);
  }, 240_000);

  test(`${VARIANT}: template create, publish, unpublish, delete`, async () => {
    const t: Target = target();
    const c = (call: string, fn: () => Promise<Judgement>) => rec.cell(t.stack, VARIANT, call, fn);
    try {
      // The CLI asks for 2 vCPUs by default, which the size rule maps to `medium`; the stacks' pools are `small`.
      await c("e2b template create (e2b.Dockerfile)", async () => {
        const r = await cli(t, ["template", "create", TEMPLATE, "--path", ctx, "--cpu-count", "1"], 240_000);
        return expectThat(r.code === 0 && (await templateStatus(t, TEMPLATE)) === 200, said(r));
      });
      await c("e2b template publish -y", async () => {
        const r = await cli(t, ["template", "publish", TEMPLATE, "-y"]);
        if (r.code !== 0 || !r.stdout.includes(`Published as: ${TEMPLATE}`)) return fails(said(r));
        return differs(VISIBILITY, said(r));
      });
      await c("e2b template unpublish -y", async () => {
        const r = await cli(t, ["template", "unpublish", TEMPLATE, "-y"]);
        if (r.code !== 0 || (await templateStatus(t, TEMPLATE)) !== 200) return fails(said(r));
        return differs(VISIBILITY, said(r));
      });
      await c("e2b template publish of an unknown name", async () => {
        const r = await cli(t, ["template", "publish", "no-such-template", "-y"]);
        return expectThat(r.code !== 0 && (r.stdout + r.stderr).includes("404"), said(r));
      });
      await c("e2b template delete -y", async () => {
        const r = await cli(t, ["template", "delete", TEMPLATE, "-y"]);
        return expectThat(r.code === 0 && (await templateStatus(t, TEMPLATE)) === 404, said(r));
      });
    } finally {
      await fetch(`${t.apiUrl}/templates/${TEMPLATE}`, { method: "DELETE", headers: { "x-api-key": t.apiKey } }).catch(() => undefined);
    }
    expect(rec.failures(t.stack)).toEqual([]);
  }, 420_000);
}, { builds: true });
