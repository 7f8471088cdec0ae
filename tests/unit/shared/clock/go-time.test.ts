import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import {
  floorToSecond,
  formatMicroTime,
  formatRfc3339Nano,
  formatRfc3339Seconds,
  GO_ZERO_TIME,
  parseGoTime,
} from "#shared/clock/index.ts";

describe("parseGoTime: one convention (ms; null = Go's zero time; undefined = not a time)", () => {
  test("what Go writes: Z, offsets, up to nine fraction digits truncated to milliseconds", () => {
    expect(parseGoTime("2026-07-06T00:05:00Z")).toBe(Date.UTC(2026, 6, 6, 0, 5));
    expect(parseGoTime("2026-07-06T00:05:00.123456789Z")).toBe(Date.UTC(2026, 6, 6, 0, 5, 0, 123));
    expect(parseGoTime("2026-07-06T00:05:00.5Z")).toBe(Date.UTC(2026, 6, 6, 0, 5, 0, 500));
    expect(parseGoTime("2026-07-06T02:05:00+02:00")).toBe(Date.UTC(2026, 6, 6, 0, 5));
    expect(parseGoTime("2026-07-05T22:35:00-01:30")).toBe(Date.UTC(2026, 6, 6, 0, 5));
    expect(parseGoTime("2026-07-06t00:05:00z")).toBe(Date.UTC(2026, 6, 6, 0, 5)); // RFC 3339 allows lower case
  });

  test("Go's zero time, in any zone or precision, is null", () => {
    for (const t of [GO_ZERO_TIME, "0001-01-01T00:00:00.000000000Z", "0001-01-01T00:00:00+00:00", "0001-01-01T09:00:00+09:00"]) {
      expect(parseGoTime(t)).toBeNull();
    }
  });

  test("text that is not an existing instant is undefined", () => {
    for (const t of [
      "",
      "2026-07-06",
      "2026-07-06 00:05:00Z",
      "2026-07-06T00:05:00",
      "2026-13-01T00:00:00Z",
      "2026-02-30T00:00:00Z",
      "2026-07-06T24:00:00Z",
      "2026-07-06T00:60:00Z",
      "2026-07-06T00:00:60Z",
      "2026-07-06T00:00:00+24:00",
      "yesterday",
    ]) {
      expect(parseGoTime(t)).toBeUndefined();
    }
  });

  test("years below 100 are not shifted into the 1900s", () => {
    expect(parseGoTime("0099-06-01T00:00:00Z")).toBe(new Date("0099-06-01T00:00:00Z").getTime());
  });

  test("every encoding we write parses back to the instant (at its precision)", () => {
    const ms = fc.integer({ min: Date.UTC(1970, 0, 1), max: Date.UTC(2200, 0, 1) });
    fc.assert(
      fc.property(ms, (t) => {
        expect(parseGoTime(formatRfc3339Nano(t))).toBe(t);
        expect(parseGoTime(formatMicroTime(t))).toBe(t);
        expect(parseGoTime(formatRfc3339Seconds(t))).toBe(floorToSecond(t));
        expect(parseGoTime(new Date(t).toISOString())).toBe(t);
      }),
    );
  });
});

describe("the encodings", () => {
  test("seconds (metav1.Time, claims file), RFC3339Nano trimmed (sandboxd), micro (metav1.MicroTime)", () => {
    const t = Date.UTC(2026, 6, 6, 0, 5, 0, 120);
    expect(formatRfc3339Seconds(t)).toBe("2026-07-06T00:05:00Z");
    expect(formatRfc3339Nano(t)).toBe("2026-07-06T00:05:00.12Z");
    expect(formatRfc3339Nano(Date.UTC(2026, 6, 6, 0, 5))).toBe("2026-07-06T00:05:00Z");
    expect(formatMicroTime(Date.UTC(2026, 0, 2, 3, 4, 5, 678))).toBe("2026-01-02T03:04:05.678000Z");
  });
});
