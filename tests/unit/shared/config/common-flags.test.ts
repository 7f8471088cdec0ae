// The shared e2b rows resolve their "0 means …" defaults, and the e2b surface refuses to serve without
// the configuration e2b.md §1.2 requires (exit 1, before listening).
import { describe, expect, test } from "bun:test";
import {
  StartupError,
  checkE2bOptions,
  e2bFlags,
  e2bOptionsFrom,
  parseFlags,
  type E2bOptions,
} from "#shared/config/index.ts";

function options(argv: string[]): E2bOptions {
  const outcome = parseFlags(e2bFlags, argv, {});
  if (outcome.kind !== "run") throw new Error("expected run");
  return e2bOptionsFrom(outcome.config.values);
}

const complete = ["--e2b-domain=sb.example.com", "--e2b-api-key-file=/keys", "--e2b-envd-secret-file=/secret"];

describe("e2b options", () => {
  test("seed defaults: :8080, default namespace, envd 0.8.0, timeout 300, 2 builds of 30m", () => {
    const o = options([]);
    expect(o.bindAddress).toBe(":8080");
    expect(o.namespace).toBe("default");
    expect(o.envdVersion).toBe("0.8.0");
    expect(o.defaultTimeoutSeconds).toBe(300);
    expect(o.builds).toMatchObject({ enabled: false, parallel: 2, timeoutMs: 1_800_000, logLines: 10_000, uploadMax: 1073741824 });
  });

  test("an explicit timeout is kept", () => {
    expect(options(["--e2b-default-timeout=60"]).defaultTimeoutSeconds).toBe(60);
  });

  test("a complete configuration passes", () => {
    expect(() => checkE2bOptions(options(complete))).not.toThrow();
    expect(() => checkE2bOptions(options(["--e2b-domain=d", "--e2b-allow-anonymous", "--e2b-envd-secret-file=/s"]))).not.toThrow();
  });

  const failures: [string, string[], string][] = [
    ["no key file and no anonymous flag", ["--e2b-domain=d", "--e2b-envd-secret-file=/s"], "no API key configured"],
    ["a blank domain", ["--e2b-domain=  ", "--e2b-api-key-file=/k", "--e2b-envd-secret-file=/s"], "no domain configured"],
    ["no envd secret file", ["--e2b-domain=d", "--e2b-api-key-file=/k"], "--e2b-envd-secret-file is required"],
    ["builds with parallel 0", [...complete, "--e2b-builds", "--e2b-build-parallel=0"], "invalid build options"],
    ["builds with timeout 0", [...complete, "--e2b-builds", "--e2b-build-timeout=0"], "invalid build options"],
    ["a build dir and a bucket", [...complete, "--e2b-build-dir=/d", "--e2b-build-store-s3-bucket=b"], "are exclusive"],
  ];
  for (const [name, argv, message] of failures) {
    test(`${name} stops startup with exit 1`, () => {
      let caught: unknown;
      try {
        checkE2bOptions(options(argv));
      } catch (err) {
        caught = err;
      }
      expect(caught).toBeInstanceOf(StartupError);
      expect((caught as StartupError).message).toContain(message);
      expect((caught as StartupError).exitCode).toBe(1);
    });
  }

  test("build options are only checked when builds are on", () => {
    expect(() => checkE2bOptions(options([...complete, "--e2b-build-parallel=0"]))).not.toThrow();
  });
});
