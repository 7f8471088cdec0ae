// The flag parser: spellings, precedence (flag > non-empty env > default), help/version, usage errors.
import { describe, expect, test } from "bun:test";
import {
  UsageError,
  boolFlag,
  durationFlag,
  floatFlag,
  formatHelp,
  intFlag,
  listFlag,
  parseFlags,
  quantityFlag,
  semverFlag,
  stringFlag,
  type CliOutcome,
} from "#shared/config/index.ts";

const table = {
  name: stringFlag({ flag: "name", env: "T_NAME", default: "dflt", help: "a name" }),
  empty: stringFlag({ flag: "empty", env: "T_EMPTY", help: "empty by default" }),
  on: boolFlag({ flag: "on", help: "a switch" }),
  onByDefault: boolFlag({ flag: "on-by-default", default: "true", help: "a switch that starts on" }),
  count: intFlag({ flag: "count", env: "T_COUNT", default: "3", min: 0, help: "an int" }),
  qps: floatFlag({ flag: "qps", default: "200", help: "a float" }),
  every: durationFlag({ flag: "every", env: "T_EVERY", default: "30s", positive: true, help: "a duration" }),
  memory: quantityFlag({ flag: "memory", env: "T_MEMORY", default: "8Ti", help: "a quantity" }),
  seeds: listFlag({ flag: "seeds", help: "a list" }),
  envd: semverFlag({ flag: "envd", emptyMeans: "0.8.0", help: "a version" }),
} as const;

function run(argv: string[], env: Record<string, string> = {}) {
  const outcome = parseFlags(table, argv, env);
  if (outcome.kind !== "run") throw new Error(`expected run, got ${outcome.kind}`);
  return outcome.config;
}

function usage(fn: () => unknown): UsageError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(UsageError);
    return err as UsageError;
  }
  throw new Error("expected a UsageError");
}

describe("flag spellings", () => {
  test("--flag value, --flag=value and Go's -flag all set a value", () => {
    expect(run(["--name", "a"]).values.name).toBe("a");
    expect(run(["--name=b"]).values.name).toBe("b");
    expect(run(["-name", "c"]).values.name).toBe("c");
    expect(run(["-name=d"]).values.name).toBe("d");
  });

  test("a value may itself start with a dash or contain '='", () => {
    expect(run(["--qps", "-1"]).values.qps).toBe(-1);
    expect(run(["--name", "a=b"]).values.name).toBe("a=b");
    expect(run(["--name=a=b"]).values.name).toBe("a=b");
  });

  test("a bare bool is true and never swallows the next argument", () => {
    expect(() => run(["--on", "false"])).toThrow(UsageError); // "false" is a stray argument, as in Go
    expect(run(["--on"]).values.on).toBe(true);
    expect(run(["--on=false"]).values.on).toBe(false);
    expect(run(["--on=true"]).values.on).toBe(true);
    expect(run(["--on-by-default=false"]).values.onByDefault).toBe(false);
    expect(run([]).values.onByDefault).toBe(true);
  });

  test("the last occurrence of a repeated flag wins", () => {
    expect(run(["--name=a", "--name=b"]).values.name).toBe("b");
  });

  test("an explicit empty value is recorded as explicit", () => {
    const config = run(["--name="]);
    expect(config.values.name).toBe("");
    expect(config.sources.name).toBe("flag");
  });

  test("kinds convert: int, float, duration, quantity, list, semver", () => {
    const v = run(["--count=0x10", "--qps=0.5", "--every=1m30s", "--memory=4Gi", "--seeds=a:1,b:2", "--envd=0.9.1-rc.1"]).values;
    expect(v.count).toBe(16);
    expect(v.qps).toBe(0.5);
    expect(v.every).toEqual({ nanos: 90_000_000_000n, ms: 90_000 });
    expect(v.memory.string).toBe("4Gi");
    expect(v.seeds).toEqual(["a:1", "b:2"]);
    expect(v.envd).toBe("0.9.1-rc.1");
    expect(run([]).values.envd).toBe("0.8.0");
    expect(run([]).values.seeds).toEqual([]);
  });
});

describe("precedence: explicit flag, then non-empty environment, then default", () => {
  test("the default applies when neither is given", () => {
    const config = run([]);
    expect(config.values.name).toBe("dflt");
    expect(config.sources.name).toBe("default");
  });

  test("a non-empty environment variable replaces the default", () => {
    const config = run([], { T_NAME: "from-env", T_COUNT: "7", T_EVERY: "2s", T_MEMORY: "1Gi" });
    expect(config.values.name).toBe("from-env");
    expect(config.sources.name).toBe("env");
    expect(config.values.count).toBe(7);
    expect(config.values.every.ms).toBe(2000);
    expect(config.values.memory.string).toBe("1Gi");
  });

  test("an explicit flag wins over the environment", () => {
    const config = run(["--name=from-flag", "--count=1"], { T_NAME: "from-env", T_COUNT: "7" });
    expect(config.values.name).toBe("from-flag");
    expect(config.values.count).toBe(1);
  });

  test("an explicit empty flag wins over a non-empty environment variable", () => {
    expect(run(["--name="], { T_NAME: "from-env" }).values.name).toBe("");
  });

  test("an empty environment variable counts as unset", () => {
    const config = run([], { T_NAME: "", T_EMPTY: "", T_COUNT: "" });
    expect(config.values.name).toBe("dflt");
    expect(config.sources.name).toBe("default");
    expect(config.values.count).toBe(3);
  });

  test("a bad environment value is a usage error naming the flag and the variable", () => {
    const err = usage(() => run([], { T_MEMORY: "banana" }));
    expect(err.message).toContain("--memory");
    expect(err.message).toContain("T_MEMORY");
    expect(err.message).toContain('"banana"');
    expect(err.flag).toBe("--memory");
    expect(err.value).toBe("banana");
  });

  test("a bad environment value is ignored when the flag overrides it", () => {
    expect(run(["--memory=1Gi"], { T_MEMORY: "banana" }).values.memory.string).toBe("1Gi");
  });
});

describe("usage errors name the flag and the value", () => {
  const cases: [string[], string][] = [
    [["--bogus"], "unknown flag: --bogus"],
    [["--bogus=1"], "unknown flag: --bogus"],
    [["--name"], "flag needs an argument: --name"],
    [["stray"], 'unexpected argument "stray"'],
    [["--", "stray"], 'unexpected argument "stray"'],
    [["---name=a"], "bad flag syntax: ---name=a"],
    [["--on=maybe"], 'invalid value "maybe" for flag --on'],
    [["--count=abc"], 'invalid value "abc" for flag --count'],
    [["--count=-1"], 'invalid value "-1" for flag --count: must be at least 0'],
    [["--count=1.5"], 'invalid value "1.5" for flag --count'],
    [["--qps=NaN"], 'invalid value "NaN" for flag --qps'],
    [["--every=10"], 'invalid value "10" for flag --every: time: missing unit in duration "10"'],
    [["--every=0"], 'invalid value "0" for flag --every: must be a positive duration'],
    [["--every=-5s"], 'invalid value "-5s" for flag --every: must be a positive duration'],
    [["--memory=banana"], 'invalid value "banana" for flag --memory'],
    [["--envd=v0.8.0"], 'invalid value "v0.8.0" for flag --envd'],
    [["--envd=0.8"], 'invalid value "0.8" for flag --envd'],
  ];
  for (const [argv, message] of cases) {
    test(`${argv.join(" ")} → ${message}`, () => {
      const err = usage(() => parseFlags(table, argv, {}));
      expect(err.message).toContain(message);
      expect(err.exitCode).toBe(2);
    });
  }
});

describe("help and version", () => {
  const kind = (argv: string[]): CliOutcome<unknown>["kind"] => parseFlags(table, argv, {}).kind;

  test("--help, -h and -help ask for the table", () => {
    expect(kind(["--help"])).toBe("help");
    expect(kind(["-h"])).toBe("help");
    expect(kind(["-help"])).toBe("help");
    expect(kind(["--name=a", "--help", "--bogus"])).toBe("help");
  });

  test("an unknown flag before --help is still a usage error", () => {
    expect(() => kind(["--bogus", "--help"])).toThrow("unknown flag: --bogus");
  });

  test("--version wins over a value that would not convert", () => {
    expect(kind(["--version"])).toBe("version");
    expect(kind(["--memory=banana", "--version"])).toBe("version");
    expect(kind(["--version=false"])).toBe("run");
  });

  test("the help table lists every flag with its environment variable, default and description", () => {
    const text = formatHelp({
      name: "t",
      summary: "a test binary",
      table,
      envOnly: [{ env: "T_LOG_LEVEL", default: "info", help: "log level" }],
    });
    for (const spec of Object.values(table)) {
      const line = text.split("\n").find((l) => l.startsWith(`--${spec.flag} `) || l === `--${spec.flag}`);
      expect(line).toBeDefined();
      expect(line).toContain(spec.help);
      if (spec.env) expect(line).toContain(spec.env);
    }
    expect(text).toMatch(/--name <string>\s+T_NAME\s+dflt\s+a name/);
    expect(text).toMatch(/--empty <string>\s+T_EMPTY\s+none\s+empty by default/);
    expect(text).toContain("--version");
    expect(text).toMatch(/T_LOG_LEVEL\s+info\s+log level/);
  });
});

describe("numbers as Go's flag package reads them", () => {
  test("integers: decimal, prefixed, octal, underscores between digits", async () => {
    const { parseGoInt } = await import("../../../../shared/config/flag-kinds.ts");
    const ok: [string, number][] = [
      ["0", 0], ["42", 42], ["+7", 7], ["-7", -7], ["0x1F", 31], ["0X_1f", 31], ["0o17", 15], ["017", 15],
      ["0b101", 5], ["1_000", 1000], ["-0", 0],
    ];
    for (const [raw, n] of ok) expect(parseGoInt(raw)).toBe(n);
    for (const raw of ["", "-", "1.0", "1e3", "_1", "1_", "1__0", "08", "0x", "0xg", " 1", "abc", "9007199254740993"]) {
      expect(() => parseGoInt(raw)).toThrow();
    }
  });

  test("floats: decimal and exponent forms; NaN and infinities refused", async () => {
    const { parseGoFloat } = await import("../../../../shared/config/flag-kinds.ts");
    const ok: [string, number][] = [["200", 200], ["0.5", 0.5], [".5", 0.5], ["5.", 5], ["1e3", 1000], ["-1", -1], ["+2.5E-1", 0.25]];
    for (const [raw, n] of ok) expect(parseGoFloat(raw)).toBe(n);
    for (const raw of ["", "NaN", "Inf", "1e999", "1,5", "0x10", "1e", "."]) expect(() => parseGoFloat(raw)).toThrow();
  });
});
