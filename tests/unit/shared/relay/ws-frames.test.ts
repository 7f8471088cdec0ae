// The incremental WebSocket frame reader: any frame split anywhere comes out whole, a declared size over the cap is
// refused before anything is allocated, a stopping sink leaves the rest to the caller, and reassembly is linear
// (a 64 MiB frame in 64 KiB reads takes about as long per byte as an 8 MiB one).
import { expect, test } from "bun:test";
import fc from "fast-check";
import { encodeFrame, FrameReader, TOO_BIG } from "#shared/relay/ws-frames.ts";

function unmaskedHead(op: number, len: number): Buffer {
  if (len < 126) return Buffer.from([0x80 | op, len]);
  if (len < 65536) return Buffer.from([0x80 | op, 126, len >> 8, len & 0xff]);
  const h = Buffer.alloc(10);
  h[0] = 0x80 | op;
  h[1] = 127;
  h.writeBigUInt64BE(BigInt(len), 2);
  return h;
}

test("frames of every length encoding, masked or not, split at arbitrary points, come out whole and in order", () => {
  fc.assert(
    fc.property(
      fc.array(fc.tuple(fc.constantFrom(1, 2, 9), fc.oneof(fc.integer({ min: 0, max: 125 }), fc.integer({ min: 126, max: 70_000 })), fc.boolean()), { minLength: 1, maxLength: 4 }),
      fc.array(fc.nat(), { maxLength: 6 }),
      (specs, cuts) => {
        const payloads = specs.map(([op, len], k) => Buffer.alloc(op >= 8 ? len % 126 : len, k + 1)); // control frames: ≤ 125 bytes
        const wire = Buffer.concat(specs.map(([op, , masked], k) => (masked ? encodeFrame(op, payloads[k]!) : Buffer.concat([unmaskedHead(op, payloads[k]!.length), payloads[k]!]))));
        const points = [...new Set(cuts.map((c) => c % (wire.length + 1)))].sort((a, b) => a - b);
        const reader = new FrameReader(1 << 20);
        const got: { op: number; payload: Buffer }[] = [];
        let from = 0;
        for (const to of [...points, wire.length]) {
          const piece = wire.subarray(from, to);
          expect(reader.feed(piece, 0, (_fin, op, payload) => (got.push({ op, payload: Buffer.from(payload) }), true))).toBe(piece.length);
          from = to;
        }
        expect(got.map((g) => g.op)).toEqual(specs.map(([op]) => op));
        got.forEach((g, k) => expect(Buffer.compare(g.payload, payloads[k]!)).toBe(0));
        expect(reader.midFrame).toBe(false);
      },
    ),
    { numRuns: 200 },
  );
});

test("a declared length over the cap is refused at its header", () => {
  const reader = new FrameReader(1024);
  expect(reader.feed(unmaskedHead(2, 1025), 0, () => true)).toBe(TOO_BIG);
  const huge = Buffer.from([0x82, 127, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);
  expect(new FrameReader(64 << 20).feed(huge, 0, () => true)).toBe(TOO_BIG);
});

test("a sink that stops gets no more frames; the offset returned is where the next frame starts", () => {
  const two = Buffer.concat([unmaskedHead(1, 1), Buffer.from("a"), unmaskedHead(1, 1), Buffer.from("b")]);
  const reader = new FrameReader(1024);
  const seen: string[] = [];
  const at = reader.feed(two, 0, (_f, _o, p) => (seen.push(p.toString()), false));
  expect(seen).toEqual(["a"]);
  expect(at).toBe(3);
  expect(reader.feed(two, at, (_f, _o, p) => (seen.push(p.toString()), true))).toBe(two.length);
  expect(seen).toEqual(["a", "b"]);
});

test("reassembly is linear: per byte, a 64 MiB frame read in 64 KiB pieces costs about what an 8 MiB one does", () => {
  const perByte = (size: number) => {
    const wire = Buffer.concat([unmaskedHead(2, size), Buffer.alloc(size, 7)]);
    const reader = new FrameReader(64 << 20);
    let got = 0;
    const t0 = performance.now();
    for (let off = 0; off < wire.length; off += 65536) reader.feed(wire.subarray(off, Math.min(off + 65536, wire.length)), 0, (_f, _o, p) => ((got = p.length), true));
    expect(got).toBe(size);
    return (performance.now() - t0) / size;
  };
  perByte(8 << 20); // warm up
  const small = perByte(8 << 20);
  const large = perByte(64 << 20);
  // Quadratic joining would make the 64 MiB frame 8x as costly per byte; allow generous noise for a busy machine.
  expect(large).toBeLessThan(small * 4 + 1e-6);
});
