// The relay's WebSocket frame codec: masked client frames decode back to their payload at every length encoding
// (7-bit, 16-bit, 64-bit), split anywhere across reads.
import { expect, test } from "bun:test";
import fc from "fast-check";
import { decodeFrames, encodeFrame } from "#shared/relay/websocket.ts";

test("encode -> decode round-trips any payload and opcode, across any split of the bytes", () => {
  fc.assert(
    fc.property(fc.constantFrom(0, 1, 2, 8, 9, 10), fc.oneof(fc.integer({ min: 0, max: 125 }), fc.integer({ min: 126, max: 70_000 })), fc.nat(), (op, anyLen, cut) => {
      const len = op >= 8 ? anyLen % 126 : anyLen; // a control frame carries at most 125 bytes (RFC 6455 §5.5)
      const payload = new Uint8Array(len).map((_, i) => (i * 31 + len) & 0xff);
      const frame = encodeFrame(op, payload);
      const at = cut % (frame.length + 1);
      const first = decodeFrames(frame.subarray(0, at));
      const joined = Buffer.concat([first.rest, frame.subarray(at)]);
      const second = decodeFrames(joined);
      const frames = [...first.frames, ...second.frames];
      expect(frames).toHaveLength(1);
      expect(frames[0]!.op).toBe(op);
      expect(frames[0]!.fin).toBe(true);
      expect(Buffer.compare(frames[0]!.payload, Buffer.from(payload))).toBe(0);
      expect(second.rest.length).toBe(0);
    }),
    { numRuns: 200 },
  );
});

test("several frames in one read, and a declared length over the cap", () => {
  const two = Buffer.concat([encodeFrame(1, Buffer.from("a")), encodeFrame(2, Buffer.from([1, 2]))]);
  expect(decodeFrames(two).frames.map((f) => f.op)).toEqual([1, 2]);
  const huge = Buffer.from([0x82, 127, 0, 0, 0, 1, 0, 0, 0, 0]);
  expect(decodeFrames(huge).tooBig).toBe(true);
});

test("a control frame over 125 bytes, or without FIN, is a protocol error, refused at its header", () => {
  fc.assert(
    fc.property(fc.constantFrom(8, 9, 10), fc.integer({ min: 126, max: 70_000 }), (op, len) => {
      const frame = encodeFrame(op, new Uint8Array(len));
      // The header alone is enough: the payload is never waited for or held.
      const head = frame.subarray(0, len < 65536 ? 8 : 14);
      expect(decodeFrames(head).badControl).toBe(true);
    }),
  );
  const fragmentedPing = Buffer.from([0x09, 0x80, 0, 0, 0, 0]); // FIN clear, masked, empty
  expect(decodeFrames(fragmentedPing).badControl).toBe(true);
});
