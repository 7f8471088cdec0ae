// parseQuantity must read and print quantities exactly as Kubernetes' resource.Quantity does.
import { describe, expect, test } from "bun:test";
import { QuantityError, parseQuantity } from "#shared/config/quantity.ts";

describe("parseQuantity canonicalises like resource.Quantity", () => {
  // [input, canonical string, format, Value() (ceil to an integer)]
  const cases: [string, string, string, number][] = [
    ["0", "0", "DecimalSI", 0],
    ["4000", "4k", "DecimalSI", 4000],
    ["2000", "2k", "DecimalSI", 2000],
    ["1500", "1500", "DecimalSI", 1500],
    ["1.5k", "1500", "DecimalSI", 1500],
    ["1k", "1k", "DecimalSI", 1000],
    ["1000m", "1", "DecimalSI", 1],
    ["100m", "100m", "DecimalSI", 1],
    ["0.1", "100m", "DecimalSI", 1],
    ["1.5", "1500m", "DecimalSI", 2],
    ["1m", "1m", "DecimalSI", 1],
    ["1u", "1u", "DecimalSI", 1],
    ["1n", "1n", "DecimalSI", 1],
    ["0.1n", "1n", "DecimalSI", 1], // finer than nano rounds up, never to zero
    ["1E", "1E", "DecimalSI", 1e18],
    ["1000E", "1000E", "DecimalSI", 1e21],
    ["007", "7", "DecimalSI", 7],
    ["+1k", "1k", "DecimalSI", 1000],
    ["1.", "1", "DecimalSI", 1],
    [".5", "500m", "DecimalSI", 1],
    ["1.G", "1G", "DecimalSI", 1e9],
    ["-1", "-1", "DecimalSI", -1],
    ["-0.5", "-500m", "DecimalSI", -1],
    ["-0", "0", "DecimalSI", 0],
    ["8Ti", "8Ti", "BinarySI", 8 * 2 ** 40],
    ["1Ki", "1Ki", "BinarySI", 1024],
    ["1024Ki", "1Mi", "BinarySI", 2 ** 20],
    ["1536Mi", "1536Mi", "BinarySI", 1536 * 2 ** 20],
    ["1.5Gi", "1536Mi", "BinarySI", 1536 * 2 ** 20],
    ["1.5Ki", "1536", "BinarySI", 1536],
    ["0.5Ki", "512", "BinarySI", 512], // below 1Ki binary prints as decimal
    ["1.1Ki", "1126400m", "BinarySI", 1127], // fractional binary prints as decimal
    ["1Ei", "1Ei", "BinarySI", 2 ** 60],
    ["9Ei", "9223372036854775807", "BinarySI", 9223372036854775807], // capped at int64 max
    ["-1Ki", "-1Ki", "BinarySI", -1024],
    ["0Ki", "0", "BinarySI", 0],
    ["1e3", "1e3", "DecimalExponent", 1000],
    ["1E3", "1e3", "DecimalExponent", 1000],
    ["1e+3", "1e3", "DecimalExponent", 1000],
    ["12e3", "12e3", "DecimalExponent", 12000],
    ["1.5e3", "1500", "DecimalExponent", 1500],
    ["1e-3", "1e-3", "DecimalExponent", 1],
    ["100e-2", "1", "DecimalExponent", 1],
    // Kubernetes quirk: a number part without digits reads as zero when the fast path takes it.
    ["-", "0", "DecimalSI", 0],
    [".", "0", "DecimalSI", 0],
    ["Ki", "0", "DecimalSI", 0],
    ["m", "0", "DecimalSI", 0],
  ];
  for (const [input, canonical, format, value] of cases) {
    test(`${JSON.stringify(input)} reads as ${canonical}`, () => {
      const q = parseQuantity(input);
      expect(q.string).toBe(canonical);
      if (canonical !== "0") expect(q.format).toBe(format as typeof q.format);
      expect(q.value).toBe(value);
    });
  }

  test("the exact value is kept in nanos and milli values round up", () => {
    expect(parseQuantity("1.5").nanos).toBe(1_500_000_000n);
    expect(parseQuantity("1n").milliValue).toBe(1);
    expect(parseQuantity("250m").milliValue).toBe(250);
    expect(parseQuantity("8Ti").nanos).toBe(8n * 2n ** 40n * 1_000_000_000n);
  });

  test("re-parsing a canonical string is stable", () => {
    for (const [input] of cases) {
      const once = parseQuantity(input).string;
      expect(parseQuantity(once).string).toBe(once);
    }
  });
});

describe("parseQuantity refuses what Kubernetes refuses", () => {
  const invalid = ["", " 1", "1 ", "1K", "1ki", "1KiB", "1e", "1E+", "abc", "banana", "1.2.3", "1e3.5", "--1", "1Mi5", "1x", "Pi", ".Ei", "e-12", "1,000", "0x10"];
  for (const input of invalid) {
    test(`${JSON.stringify(input)} is an error that quotes the input`, () => {
      expect(() => parseQuantity(input)).toThrow(QuantityError);
      expect(() => parseQuantity(input)).toThrow(`quantity ${JSON.stringify(input)}`);
    });
  }
});
