// The body decoders' offset form (feedRanges, what the relay's HTTP/1.1 leg uses so a body of tiny chunks costs no
// view object per chunk) hands over exactly the bytes feed's slices do, for every framing and any split of the reads.
import { expect, test } from "bun:test";
import fc from "fast-check";
import { bodyDecoder, type BodyDecoder } from "#shared/relay/framing/index.ts";

function chunked(parts: Uint8Array[]): Buffer {
  const out: Buffer[] = [];
  for (const p of parts) if (p.length) out.push(Buffer.from(`${p.length.toString(16)}\r\n`), Buffer.from(p), Buffer.from("\r\n"));
  out.push(Buffer.from("0\r\n\r\n"));
  return Buffer.concat(out);
}

function run(d: BodyDecoder, wire: Buffer, cuts: number[], ranges: boolean): Buffer {
  const got: Buffer[] = [];
  let prev = 0;
  for (const at of [...cuts.filter((c) => c > 0 && c < wire.length).sort((a, b) => a - b), wire.length]) {
    const read = Buffer.from(wire.subarray(prev, at));
    prev = at;
    if (ranges) d.feedRanges(read, (s, e) => got.push(Buffer.from(read.subarray(s, e))));
    else d.feed(read, (s) => got.push(Buffer.from(s)));
  }
  return Buffer.concat(got);
}

test("feedRanges and feed agree on chunked, Content-Length and close-delimited bodies in any split", () => {
  fc.assert(
    fc.property(fc.array(fc.uint8Array({ maxLength: 40 }), { maxLength: 30 }), fc.array(fc.nat(2000), { maxLength: 12 }), (parts, cuts) => {
      const body = Buffer.concat(parts);
      const cases: [() => BodyDecoder, Buffer][] = [
        [() => bodyDecoder({ kind: "chunked" }), chunked(parts)],
        [() => bodyDecoder({ kind: "length", length: body.length }), body],
        [() => bodyDecoder({ kind: "close" }), body],
      ];
      for (const [make, wire] of cases) {
        const a = make();
        const b = make();
        expect(run(a, wire, cuts, true)).toEqual(body);
        expect(run(b, wire, cuts, false)).toEqual(body);
        expect(a.done).toBe(b.done);
      }
    }),
    { numRuns: 200 },
  );
});

test("1-byte chunks: one read of 4096 chunks is 4096 ranges of one byte each, all inside the read", () => {
  const wire = Buffer.from("1\r\nx\r\n".repeat(4096), "latin1");
  const d = bodyDecoder({ kind: "chunked" });
  let n = 0;
  d.feedRanges(wire, (s, e) => {
    expect(e - s).toBe(1);
    expect(wire[s]).toBe(0x78);
    n++;
  });
  expect(n).toBe(4096);
});
