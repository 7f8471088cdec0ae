// The guest leg's incremental chunked decoder: any body, cut into any chunks (with extensions and trailers), fed
// in any split of the bytes, decodes back to the body and ends exactly at the terminating line.
import { expect, test } from "bun:test";
import fc from "fast-check";
import { ChunkedDecoder } from "#shared/relay/h1.ts";

function encode(parts: Uint8Array[], ext: boolean, trailers: boolean): Buffer {
  const out: Buffer[] = [];
  for (const p of parts) {
    if (p.length === 0) continue;
    out.push(Buffer.from(`${p.length.toString(16)}${ext ? ";x=1" : ""}\r\n`), Buffer.from(p), Buffer.from("\r\n"));
  }
  out.push(Buffer.from(`0\r\n${trailers ? "x-trailer: 1\r\n" : ""}\r\n`));
  return Buffer.concat(out);
}

test("decode(encode(parts)) = concat(parts), across any split of the wire bytes", () => {
  fc.assert(
    fc.property(fc.array(fc.uint8Array({ maxLength: 300 }), { maxLength: 8 }), fc.array(fc.nat(), { maxLength: 6 }), fc.boolean(), fc.boolean(), (parts, cuts, ext, trailers) => {
      const wire = encode(parts, ext, trailers);
      const points = [...new Set(cuts.map((c) => c % (wire.length + 1)))].sort((a, b) => a - b);
      const d = new ChunkedDecoder();
      const got: Buffer[] = [];
      let prev = 0;
      for (const p of [...points, wire.length]) {
        d.feed(wire.subarray(prev, p), (s) => got.push(Buffer.from(s)));
        prev = p;
      }
      expect(d.done).toBe(true);
      expect(Buffer.compare(Buffer.concat(got), Buffer.concat(parts.map((p) => Buffer.from(p))))).toBe(0);
    }),
    { numRuns: 300 },
  );
});

test("a bad chunk size is an error, not a silent truncation", () => {
  expect(() => new ChunkedDecoder().feed(Buffer.from("zz\r\nabc"), () => undefined)).toThrow("bad chunk size");
});
