// ENV values are expanded in TypeScript with Docker's rules, never by a shell (attacker review L4: `$(id)` and
// `${P@P}` ran commands when a shell expanded them).
import { describe, expect, test } from "bun:test";
import { EnvExpansionError, expandEnv, parseEnvBlock } from "#shared/e2b/builds/env-expand.ts";

const vars: Record<string, string> = { A: "hello", EMPTY: "", PATH: "/usr/bin", P: "$(id)" };
const x = (v: string) => expandEnv(v, (k) => vars[k]);

describe("expandEnv", () => {
  test("Docker's forms", () => {
    expect(x("$A/${A}/x$A")).toBe("hello/hello/xhello");
    expect(x("/opt/bin:$PATH")).toBe("/opt/bin:/usr/bin");
    expect(x("${UNSET:-dflt} ${EMPTY:-e} ${EMPTY-set} ${UNSET-u}")).toBe("dflt e  u");
    expect(x("${A:+yes}|${EMPTY:+no}|${EMPTY+set}|${UNSET+no}")).toBe("yes||set|");
    expect(x("${UNSET:-${A}-$A}")).toBe("hello-hello");
    expect(x("$UNSET.")).toBe(".");
    expect(x("\\$A costs $5 and $")).toBe("$A costs $5 and $");
  });

  test("nothing runs: command substitution stays text, prompt and other operators are refused", () => {
    expect(x("$(id) `id` $((1+1))")).toBe("$(id) `id` $((1+1))");
    // A value holding `$(id)` is not expanded again.
    expect(x("${P}")).toBe("$(id)");
    expect(() => x("${P@P}")).toThrow(EnvExpansionError);
    expect(() => x("${A/h/j}")).toThrow(/unsupported substitution/);
    expect(() => x("${!A}")).toThrow(/unsupported substitution/);
    expect(() => x("${A")).toThrow(/unterminated/);
    expect(() => x(`${"${U:-".repeat(20)}x${"}".repeat(20)}`)).toThrow(/nested deeper/);
  });

  test("env -0 output parses to a map", () => {
    expect(parseEnvBlock("HOME=/home/user\0PATH=/bin:/usr/bin\0X=a=b\0\0junk")).toEqual({ HOME: "/home/user", PATH: "/bin:/usr/bin", X: "a=b" });
  });
});
