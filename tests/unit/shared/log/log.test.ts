// The root logger: level from the binary's variable in any case, unknown levels stop startup, JSON lines,
// child bindings, and no credential in any line however it is passed. Output is captured, not mocked.
import { describe, expect, test } from "bun:test";
import { StartupError } from "#shared/config/errors.ts";
import { REDACTED, createLogger, createRootLogger, parseLogLevel, type LogLevel } from "#shared/log/index.ts";

function capture(level: LogLevel = "debug") {
  const lines: string[] = [];
  const log = createLogger({ level, name: "test", destination: { write: (line: string) => lines.push(line) } });
  return { log, lines, text: () => lines.join(""), records: () => lines.map((l) => JSON.parse(l) as Record<string, unknown>) };
}

describe("log level", () => {
  test("unset or empty means info", () => {
    expect(parseLogLevel(undefined, "VK_LOG_LEVEL")).toBe("info");
    expect(parseLogLevel("", "VK_LOG_LEVEL")).toBe("info");
  });

  test("any letter case is accepted", () => {
    for (const raw of ["debug", "DEBUG", "Info", "wArN", "ERROR"]) {
      expect(parseLogLevel(raw, "OPERATOR_LOG_LEVEL")).toBe(raw.toLowerCase() as LogLevel);
    }
  });

  test("an unknown level is a startup error naming the variable and the value", () => {
    for (const raw of ["verbose", "trace", "fatal", "warning", "1"]) {
      let caught: unknown;
      try {
        parseLogLevel(raw, "VK_LOG_LEVEL");
      } catch (err) {
        caught = err;
      }
      expect(caught).toBeInstanceOf(StartupError);
      expect((caught as Error).message).toContain("VK_LOG_LEVEL");
      expect((caught as Error).message).toContain(JSON.stringify(raw));
    }
  });

  test("the root logger reads its own variable and filters below the level", () => {
    const lines: string[] = [];
    const log = createRootLogger({
      name: "vk-sandbox",
      levelEnv: "VK_LOG_LEVEL",
      env: { VK_LOG_LEVEL: "WARN", OPERATOR_LOG_LEVEL: "debug" },
      destination: { write: (l: string) => lines.push(l) },
    });
    log.info("hidden");
    log.warn("shown");
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0]!)).toMatchObject({ level: "warn", name: "vk-sandbox", msg: "shown" });
  });
});

describe("lines", () => {
  test("are one JSON object each, with a level label, an ISO time and the binary name", () => {
    const { log, records } = capture();
    log.info({ pod: "default/a" }, "claimed");
    const [record] = records();
    expect(record).toMatchObject({ level: "info", name: "test", pod: "default/a", msg: "claimed" });
    expect(String(record!.time)).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  });

  test("child loggers carry their bound fields on every line", () => {
    const { log, records } = capture();
    const child = log.child({ pod: "ns/p" }).child({ claimId: "sb_1" });
    child.info("one");
    child.debug("two");
    expect(records()).toEqual([
      expect.objectContaining({ pod: "ns/p", claimId: "sb_1", msg: "one" }),
      expect.objectContaining({ pod: "ns/p", claimId: "sb_1", msg: "two" }),
    ]);
  });

  test("errors are serialized with type, message and stack", () => {
    const { log, records } = capture();
    log.error({ err: new TypeError("bad thing") }, "failed");
    expect(records()[0]!.err).toMatchObject({ type: "TypeError", message: "bad thing" });
  });
});

describe("redaction: no credential reaches a line", () => {
  const secrets = ["tok-top", "tok-nested", "tok-deep", "tok-header", "tok-bearer-msg", "tok-err-msg", "tok-err-field", "tok-child", "tok-arg", "tok-query", "tok-pw", "tok-apikey", "tok-cause", "tok-array", "tok-map", "dG9rLWJhc2lj"];

  test("by key at any depth, in strings, errors, child bindings and format arguments", () => {
    const { log, text, records } = capture();
    log.info({ token: "tok-top" }, "top-level field");
    log.info({ reply: { sandbox: { id: "sb_1", token: "tok-nested", nested: { claimToken: "tok-deep" } } } }, "nested");
    log.info({ headers: { Authorization: "Bearer tok-header", "x-request-id": "r1" } }, "headers");
    log.info("calling sandboxd with Authorization: Bearer tok-bearer-msg");
    const err = new Error("request failed: Authorization: Bearer tok-err-msg", { cause: new Error("Bearer tok-cause") });
    (err as Error & { token?: string }).token = "tok-err-field";
    log.error(err);
    log.error({ err }, "wrapped");
    log.child({ sandboxdToken: "tok-child", node: "n1" }).warn("child");
    log.info("token is %s", "Bearer tok-arg");
    log.info({ url: "https://3000-sb.example.com/files?path=/a&signature=tok-query" }, "signed url");
    log.info({ user: { password: "tok-pw" }, apiKey: "tok-apikey" }, "credentials");
    log.info({ rows: [{ token: "tok-array" }] }, "array");
    log.info({ table: new Map([["token", "tok-map"]]) }, "map");
    log.info({ header: "Basic dG9rLWJhc2lj" }, "basic auth");
    const all = text();
    for (const secret of secrets) expect(all).not.toContain(secret);
    expect(all).toContain(REDACTED);
    // What is not a secret stays readable.
    const lines = records();
    expect(lines[1]).toMatchObject({ reply: { sandbox: { id: "sb_1", token: REDACTED } } });
    expect(lines[2]).toMatchObject({ headers: { Authorization: REDACTED, "x-request-id": "r1" } });
    expect(all).toContain('"node":"n1"');
    expect(all).toContain("path=/a");
    expect(all).toContain("token is Bearer");
    expect(all).toContain("basic auth");
  });

  test("file paths that name where a secret lives stay readable", () => {
    const { log, records } = capture();
    log.info({ sandboxdTokenFile: "/etc/vk-sandbox/sandboxd-token", e2bEnvdSecretFile: "/run/secret" }, "config");
    expect(records()[0]).toMatchObject({ sandboxdTokenFile: "/etc/vk-sandbox/sandboxd-token", e2bEnvdSecretFile: "/run/secret" });
  });

  test("the caller's objects are not mutated", () => {
    const { log } = capture();
    const row = { id: "sb_1", token: "tok-keep" };
    log.info({ row }, "row");
    expect(row.token).toBe("tok-keep");
  });

  test("circular structures do not break logging", () => {
    const { log, records } = capture();
    const a: Record<string, unknown> = { name: "a" };
    a.self = a;
    log.info({ a }, "circular");
    expect(records()[0]).toMatchObject({ a: { name: "a", self: "[Circular]" } });
  });
});

describe("terminal output", () => {
  test("pretty lines are readable text with the same redaction", () => {
    const lines: string[] = [];
    const log = createLogger({ level: "info", name: "vk-sandbox", pretty: true, destination: { write: (l: string) => lines.push(l) } });
    log.info({ pod: "default/a", token: "tok-x", note: "two words" }, "claimed");
    log.error({ err: new Error("boom") }, "failed");
    expect(lines[0]).toMatch(/^\d\d:\d\d:\d\d\.\d{3} INFO  \[vk-sandbox\] claimed pod=default\/a token=\[REDACTED\] note="two words"\n$/);
    expect(lines[1]).toContain("ERROR [vk-sandbox] failed");
    expect(lines[1]).toContain("Error: boom");
    expect(lines.join("")).not.toContain("tok-x");
  });
});
