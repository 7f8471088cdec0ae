// runMain: the order every entry point follows, and its exit codes (2 usage, 0 help/version, 1 fatal).
import { describe, expect, test } from "bun:test";
import {
  StartupError,
  formatHelp,
  parseFlags,
  stringFlag,
  type CliOutcome,
  type Env,
  type ParsedFlags,
} from "#shared/config/index.ts";
import { runMain, type MainSpec } from "#shared/lifecycle/main.ts";

const table = { name: stringFlag({ flag: "name", default: "x", help: "a name" }) };
type Config = ParsedFlags<typeof table>;

function harness(argv: string[], env: Env, run: MainSpec<Config>["run"]) {
  const out: string[] = [];
  const err: string[] = [];
  const lines: string[] = [];
  const exits: number[] = [];
  const spec: MainSpec<Config> = {
    name: "demo",
    logLevelEnv: "DEMO_LOG_LEVEL",
    parse: (a, e): CliOutcome<Config> => parseFlags(table, a, e),
    help: () => formatHelp({ name: "demo", summary: "demo binary", table }),
    run,
    argv,
    env,
    stdout: (t) => out.push(t),
    stderr: (t) => err.push(t),
    logDestination: { write: (l: string) => lines.push(l) },
    exit: (code) => exits.push(code),
  };
  return { spec, out, err, lines, exits, records: () => lines.map((l) => JSON.parse(l) as Record<string, unknown>) };
}

describe("runMain", () => {
  test("an unknown flag exits 2 with a message naming it, before any log line", async () => {
    const h = harness(["--bogus"], {}, () => 0);
    expect(await runMain(h.spec)).toBe(2);
    expect(h.exits).toEqual([2]);
    expect(h.err.join("")).toContain("demo: unknown flag: --bogus");
    expect(h.lines).toEqual([]);
  });

  test("--help prints the table on stdout and exits 0", async () => {
    const h = harness(["--help"], {}, () => 1);
    expect(await runMain(h.spec)).toBe(0);
    expect(h.out.join("")).toContain("--name <string>");
  });

  test("--version prints the version line and exits 0 without running or logging", async () => {
    let ran = false;
    const h = harness(["--version"], { DEMO_LOG_LEVEL: "bogus" }, () => {
      ran = true;
    });
    expect(await runMain(h.spec)).toBe(0);
    expect(h.out.join("")).toMatch(/^demo \S+ \(rev=\S+ built=\S+\)\n$/);
    expect(ran).toBe(false);
    expect(h.lines).toEqual([]);
  });

  test("an unknown log level exits 1 with one line naming the variable", async () => {
    const h = harness([], { DEMO_LOG_LEVEL: "verbose" }, () => 0);
    expect(await runMain(h.spec)).toBe(1);
    expect(h.lines).toHaveLength(1);
    expect(h.records()[0]).toMatchObject({ level: "error" });
    expect(String(h.records()[0]!.msg)).toContain("DEMO_LOG_LEVEL");
  });

  test("a StartupError from run exits 1 with one error line carrying its context", async () => {
    const h = harness([], {}, () => {
      throw new StartupError("--e2b-domain is required", { flag: "--e2b-domain" });
    });
    expect(await runMain(h.spec)).toBe(1);
    const errors = h.records().filter((r) => r.level === "error");
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatchObject({ msg: "--e2b-domain is required", flag: "--e2b-domain" });
  });

  test("any other throw exits 1 with one error line", async () => {
    const h = harness([], {}, async () => {
      throw new Error("kaboom");
    });
    expect(await runMain(h.spec)).toBe(1);
    expect(h.records().filter((r) => r.level === "error")).toEqual([expect.objectContaining({ msg: "fatal: kaboom" })]);
  });

  test("run receives the parsed config and a logger; the start line carries the build identity", async () => {
    let seen: string | undefined;
    const h = harness(["--name=abc"], { DEMO_LOG_LEVEL: "DEBUG" }, ({ config, log }) => {
      seen = config.values.name;
      log.debug("running");
      return 0;
    });
    expect(await runMain(h.spec)).toBe(0);
    expect(seen).toBe("abc");
    const [start, running] = h.records();
    expect(start).toMatchObject({ msg: "starting", name: "demo", version: expect.any(String), revision: expect.any(String) });
    expect(running).toMatchObject({ level: "debug", msg: "running" });
  });
});
