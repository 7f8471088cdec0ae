// The relay's WebSocket frame codec (RFC 6455 §5): masked frames toward the guest (§5.3), and an incremental reader
// for the guest's frames. The reader parses each header once and copies each payload byte once into a buffer of the
// frame's declared size, so a frame of any size up to the cap is reassembled in linear time (concatenating on every
// socket read was quadratic: a 32 MiB frame held the event loop for seconds).
import { randomBytes } from "node:crypto";

/** A message larger than this from the guest closes the connection (1009) rather than growing without bound. */
export const WS_MAX_MESSAGE_BYTES = 16 * 1024 * 1024;

export const OP = { cont: 0, text: 1, binary: 2, close: 8, ping: 9, pong: 10 } as const;

/** One masked client frame. */
export function encodeFrame(op: number, payload: Uint8Array): Buffer {
  const len = payload.byteLength;
  const head = len < 126 ? 2 : len < 65536 ? 4 : 10;
  const out = Buffer.allocUnsafe(head + 4 + len);
  out[0] = 0x80 | op;
  if (len < 126) out[1] = 0x80 | len;
  else if (len < 65536) {
    out[1] = 0x80 | 126;
    out.writeUInt16BE(len, 2);
  } else {
    out[1] = 0x80 | 127;
    out.writeBigUInt64BE(BigInt(len), 2);
  }
  const mask = randomBytes(4);
  mask.copy(out, head);
  const body = head + 4;
  // Four bytes at a time where the payload allows it; the tail byte by byte.
  const m = mask.readInt32LE(0);
  const words = len >>> 2;
  const src = Buffer.from(payload.buffer, payload.byteOffset, len);
  for (let w = 0; w < words; w++) out.writeInt32LE(src.readInt32LE(w << 2) ^ m, body + (w << 2));
  for (let i = words << 2; i < len; i++) out[body + i] = payload[i]! ^ mask[i & 3]!;
  return out;
}

/** Called with each whole frame; false = stop reading after this frame (the caller feeds the rest again later). */
export type FrameSink = (fin: boolean, op: number, payload: Buffer) => boolean;

export const TOO_BIG = -1;
/** A control frame (close, ping, pong) longer than 125 bytes or fragmented: RFC 6455 §5.5 forbids both. */
export const BAD_CONTROL = -2;
/** RFC 6455 §5.5: a control frame carries at most 125 payload bytes. */
export const MAX_CONTROL_PAYLOAD = 125;

/** Reads frames from successive socket reads without joining them. */
export class FrameReader {
  private readonly head = Buffer.allocUnsafe(14);
  private headLen = 0;
  private headNeed = 2;
  private payload: Buffer | undefined;
  private filled = 0;

  constructor(private readonly maxFrameBytes: number) {}

  /** Bytes of the frame being read received so far (what it holds in memory), 0 between frames. */
  get partialBytes(): number {
    return this.payload ? this.filled : 0;
  }

  /** Inside a frame: its header or part of its payload has been read. */
  get midFrame(): boolean {
    return this.payload !== undefined || this.headLen > 0;
  }

  /**
   * Read frames from `b` starting at `off`, handing each whole one to `sink`. Returns where it stopped: `b.length`
   * once everything was read, earlier when `sink` returned false, TOO_BIG when a frame declares more than the cap,
   * BAD_CONTROL for a control frame over 125 bytes or without FIN.
   */
  feed(b: Buffer, off: number, sink: FrameSink): number {
    let i = off;
    while (i < b.length) {
      if (this.payload === undefined) {
        const n = Math.min(this.headNeed - this.headLen, b.length - i);
        b.copy(this.head, this.headLen, i, i + n);
        this.headLen += n;
        i += n;
        if (this.headLen < this.headNeed) return i;
        if (this.headNeed === 2) {
          const l7 = this.head[1]! & 0x7f;
          this.headNeed = 2 + (l7 === 126 ? 2 : l7 === 127 ? 8 : 0) + (this.head[1]! & 0x80 ? 4 : 0);
          if (this.headNeed > 2) continue;
        }
        const len = this.declaredLength();
        if (len > this.maxFrameBytes) return TOO_BIG;
        // A guest must not make the relay hold (and echo as a pong) megabytes under the name of a ping.
        if ((this.head[0]! & 0x0f) >= 8 && (len > MAX_CONTROL_PAYLOAD || (this.head[0]! & 0x80) === 0)) return BAD_CONTROL;
        // A whole unmasked frame inside this read is handed over without a copy.
        if (!this.masked() && b.length - i >= len) {
          const payload = b.subarray(i, i + len);
          i += len;
          if (!this.emit(payload, sink)) return i;
          continue;
        }
        this.payload = Buffer.allocUnsafe(len);
        this.filled = 0;
      }
      const n = Math.min(this.payload.length - this.filled, b.length - i);
      b.copy(this.payload, this.filled, i, i + n);
      this.filled += n;
      i += n;
      if (this.filled === this.payload.length) {
        const payload = this.payload;
        this.payload = undefined;
        if (this.masked()) this.unmask(payload);
        if (!this.emit(payload, sink)) return i;
      }
    }
    return i;
  }

  private masked(): boolean {
    return (this.head[1]! & 0x80) !== 0;
  }

  private declaredLength(): number {
    const l7 = this.head[1]! & 0x7f;
    if (l7 < 126) return l7;
    if (l7 === 126) return this.head.readUInt16BE(2);
    const big = this.head.readBigUInt64BE(2);
    return big > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : Number(big);
  }

  private unmask(p: Buffer): void {
    const at = this.headNeed - 4;
    for (let i = 0; i < p.length; i++) p[i]! ^= this.head[at + (i & 3)]!;
  }

  private emit(payload: Buffer, sink: FrameSink): boolean {
    const fin = (this.head[0]! & 0x80) !== 0;
    const op = this.head[0]! & 0x0f;
    this.headLen = 0;
    this.headNeed = 2;
    return sink(fin, op, payload);
  }
}

export interface Frame {
  fin: boolean;
  op: number;
  payload: Buffer;
}

/** Frames complete in `buf`, and the bytes left over (a partial frame): the reader, for callers holding one buffer. */
export function decodeFrames(buf: Buffer, maxFrameBytes = WS_MAX_MESSAGE_BYTES): { frames: Frame[]; rest: Buffer; tooBig: boolean; badControl?: true } {
  const frames: Frame[] = [];
  const reader = new FrameReader(maxFrameBytes);
  let off = 0;
  let end = 0;
  for (;;) {
    let got = false;
    const at = reader.feed(buf, off, (fin, op, payload) => {
      frames.push({ fin, op, payload: Buffer.from(payload) });
      got = true;
      return false;
    });
    if (at === TOO_BIG) return { frames, rest: Buffer.alloc(0), tooBig: true };
    if (at === BAD_CONTROL) return { frames, rest: Buffer.alloc(0), tooBig: false, badControl: true };
    if (!got) break;
    end = at;
    if (at >= buf.length) break;
    off = at;
  }
  return { frames, rest: buf.subarray(end), tooBig: false };
}
