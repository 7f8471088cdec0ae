// parseGoDuration must accept and refuse exactly what Go's time.ParseDuration does.
import { describe, expect, test } from "bun:test";
import { DurationError, formatGoDuration, nanosToMillis, parseGoDuration } from "#shared/config/duration.ts";

const S = 1_000_000_000n;

describe("parseGoDuration reads Go durations", () => {
  const cases: [string, bigint][] = [
    ["0", 0n],
    ["-0", 0n],
    ["+0", 0n],
    ["0s", 0n],
    ["5s", 5n * S],
    ["60s", 60n * S],
    ["30s", 30n * S],
    ["90s", 90n * S],
    ["1m30s", 90n * S],
    ["30m", 1800n * S],
    ["1.5h", 5400n * S],
    ["-1.5h", -5400n * S],
    ["+5s", 5n * S],
    ["300ms", 300_000_000n],
    [".5s", 500_000_000n],
    ["1.s", S],
    ["1.0s", S],
    ["1us", 1000n],
    ["1\u00b5s", 1000n],
    ["1\u03bcs", 1000n],
    ["1ns", 1n],
    ["1h2m3s4ms5us6ns", 3723n * S + 4_005_006n],
    ["3h30m", 12600n * S],
    ["10m0s", 600n * S],
    ["0.5m", 30n * S],
    ["1.000000001s", S + 1n],
    ["1.0000000019s", S + 1n], // digits past nanosecond precision are truncated
    ["9223372036854775807ns", 9223372036854775807n],
    ["2562047h47m16.854775807s", 9223372036854775807n],
    ["-2562047h47m16.854775808s", -9223372036854775808n],
    ["0.3333333333333333333h", 1_200_000_000_000n],
  ];
  for (const [input, nanos] of cases) {
    test(`${JSON.stringify(input)} is ${nanos}ns`, () => {
      expect(parseGoDuration(input)).toBe(nanos);
    });
  }
});

describe("parseGoDuration refuses what Go refuses, with Go's messages", () => {
  const cases: [string, string][] = [
    ["", 'time: invalid duration ""'],
    ["1", 'time: missing unit in duration "1"'],
    ["10", 'time: missing unit in duration "10"'],
    ["-5", 'time: missing unit in duration "-5"'],
    ["s", 'time: invalid duration "s"'],
    [".s", 'time: invalid duration ".s"'],
    ["-", 'time: invalid duration "-"'],
    ["+-1s", 'time: invalid duration "+-1s"'],
    [" 1s", 'time: invalid duration " 1s"'],
    ["1s ", 'time: unknown unit "s " in duration "1s "'],
    ["1x", 'time: unknown unit "x" in duration "1x"'],
    ["1d", 'time: unknown unit "d" in duration "1d"'],
    ["1S", 'time: unknown unit "S" in duration "1S"'],
    ["3.4.5s", 'time: missing unit in duration "3.4.5s"'],
    ["9223372036854775808ns", 'time: invalid duration "9223372036854775808ns"'],
    ["2562047h47m16.854775808s", 'time: invalid duration "2562047h47m16.854775808s"'],
    ["99999999999999999999h", 'time: invalid duration "99999999999999999999h"'],
  ];
  for (const [input, message] of cases) {
    test(`${JSON.stringify(input)} → ${message}`, () => {
      expect(() => parseGoDuration(input)).toThrow(DurationError);
      expect(() => parseGoDuration(input)).toThrow(message);
    });
  }
});

describe("formatGoDuration prints like Duration.String", () => {
  const cases: [bigint, string][] = [
    [0n, "0s"],
    [1n, "1ns"],
    [1500n, "1.5\u00b5s"],
    [500_000_000n, "500ms"],
    [90n * S, "1m30s"],
    [3600n * S, "1h0m0s"],
    [1500n * 1_000_000n, "1.5s"],
    [-90n * S, "-1m30s"],
  ];
  for (const [nanos, text] of cases) {
    test(`${nanos}ns prints ${text}`, () => {
      expect(formatGoDuration(nanos)).toBe(text);
      expect(parseGoDuration(text)).toBe(nanos);
    });
  }
  test("milliseconds truncate toward zero", () => {
    expect(nanosToMillis(1_999_999n)).toBe(1);
  });
});
