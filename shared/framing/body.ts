// Response body decoders over untrusted guest bytes (docs/envd-relay.md "Framing"). Each consumes every byte it is
// fed exactly once, so a cursor can only advance: chunk sizes are unsigned hex (no sign, no 0x, bounded digits),
// every CRLF is checked, chunk extensions and trailers are bounded and discarded. `end()` is the connection closing:
// a body that was not complete by then is a FramingError, never a truncated success.
import { FramingError } from "./error.ts";
import type { BodyFraming } from "./head.ts";
import { MAX_CHUNK_EXT_BYTES, MAX_CHUNK_SIZE_DIGITS, MAX_TRAILER_BYTES } from "./limits.ts";

export interface BodyDecoder {
  /** Decode `b`, handing body slices (views of `b`) to `out`. Bytes after the end of the body are ignored. */
  feed(b: Buffer, out: (slice: Buffer) => void): void;
  /** The same as offsets into `b` (`b[start..end)`): no view object per slice, for a body of many tiny chunks. */
  feedRanges(b: Buffer, out: (start: number, end: number) => void): void;
  /** The whole body has been seen. */
  readonly done: boolean;
  /** The connection ended: throws FramingError when the body is incomplete. */
  end(): void;
}

const fail = (message: string) => new FramingError(message, "body");

/** Exactly `length` bytes. */
export class LengthDecoder implements BodyDecoder {
  private left: number;
  constructor(length: number) {
    this.left = length;
  }
  get done(): boolean {
    return this.left === 0;
  }
  feed(b: Buffer, out: (slice: Buffer) => void): void {
    this.feedRanges(b, (s, e) => out(b.subarray(s, e)));
  }
  feedRanges(b: Buffer, out: (start: number, end: number) => void): void {
    if (this.left === 0) return;
    const n = Math.min(this.left, b.length);
    if (n > 0) out(0, n);
    this.left -= n;
  }
  end(): void {
    if (this.left > 0) throw fail(`closed ${this.left} bytes before the end of a Content-Length body`);
  }
}

/** Everything until the connection closes (a response with neither Content-Length nor chunked). */
export class CloseDecoder implements BodyDecoder {
  readonly done = false;
  feed(b: Buffer, out: (slice: Buffer) => void): void {
    if (b.length > 0) out(b);
  }
  feedRanges(b: Buffer, out: (start: number, end: number) => void): void {
    if (b.length > 0) out(0, b.length);
  }
  end(): void {}
}

/** The decoder's states: where in the chunked grammar the next byte falls. */
const S = {
  Size: 0,
  SizeWs: 1,
  Ext: 2,
  SizeLf: 3,
  Data: 4,
  DataCr: 5,
  DataLf: 6,
  TrailerStart: 7,
  TrailerName: 8,
  TrailerValue: 9,
  TrailerLf: 10,
  EndLf: 11,
  Done: 12,
} as const;
type State = (typeof S)[keyof typeof S];

const CR = 0x0d;
const LF = 0x0a;
const isWs = (c: number) => c === 0x20 || c === 0x09;
/** HTAB, visible ASCII, space and obs-text: what a chunk extension or trailer value may hold. */
const isText = (c: number) => c === 0x09 || (c >= 0x20 && c !== 0x7f);
const TOKEN = new Uint8Array(256);
for (const c of "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") TOKEN[c.charCodeAt(0)] = 1;

function hexValue(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x61 && c <= 0x66) return c - 0x57;
  if (c >= 0x41 && c <= 0x46) return c - 0x37;
  return -1;
}

/**
 * Chunked transfer coding (RFC 9112 §7.1), byte by byte on the framing lines and in bulk on chunk data, holding no
 * bytes between feeds: a line split across reads needs only the state below.
 */
export class ChunkedDecoder implements BodyDecoder {
  private s: State = S.Size;
  private size = 0;
  private digits = 0;
  private ext = 0;
  private trailer = 0;

  get done(): boolean {
    return this.s === S.Done;
  }

  feed(b: Buffer, out: (slice: Buffer) => void): void {
    this.feedRanges(b, (s, e) => out(b.subarray(s, e)));
  }

  feedRanges(b: Buffer, out: (start: number, end: number) => void): void {
    let i = 0;
    while (i < b.length && this.s !== S.Done) {
      if (this.s === S.Data) {
        const n = Math.min(this.size, b.length - i);
        out(i, i + n);
        i += n;
        this.size -= n;
        if (this.size === 0) this.s = S.DataCr;
        continue;
      }
      // Fast paths for a body of tiny chunks (the same checks as step, without a call per byte): the CRLF after a
      // chunk's data, and the size's hex digits.
      if (this.s === S.DataCr && i + 1 < b.length && b[i] === CR && b[i + 1] === LF) {
        this.s = S.Size;
        i += 2;
        continue;
      }
      if (this.s === S.Size) {
        let v: number;
        while (i < b.length && (v = hexValue(b[i]!)) >= 0) {
          if (++this.digits > MAX_CHUNK_SIZE_DIGITS) throw fail(`chunk size longer than ${MAX_CHUNK_SIZE_DIGITS} hex digits`);
          this.size = this.size * 16 + v;
          i++;
        }
        if (i === b.length) break;
      }
      this.step(b[i]!);
      i++;
    }
  }

  end(): void {
    if (this.s !== S.Done) throw fail("closed before the last chunk of a chunked body");
  }

  private step(c: number): void {
    switch (this.s) {
      case S.Size: {
        const v = hexValue(c);
        if (v >= 0) {
          if (++this.digits > MAX_CHUNK_SIZE_DIGITS) throw fail(`chunk size longer than ${MAX_CHUNK_SIZE_DIGITS} hex digits`);
          this.size = this.size * 16 + v;
          return;
        }
        if (this.digits === 0) throw fail("chunk size is not a hex number");
        if (c === CR) this.s = S.SizeLf;
        else if (c === 0x3b) this.s = S.Ext;
        else if (isWs(c)) this.s = S.SizeWs;
        else throw fail("chunk size is not a hex number");
        return;
      }
      case S.SizeWs:
        if (c === 0x3b) this.s = S.Ext;
        else if (c === CR) this.s = S.SizeLf;
        else if (!isWs(c)) throw fail("junk after a chunk size");
        return;
      case S.Ext:
        if (c === CR) this.s = S.SizeLf;
        else if (!isText(c)) throw fail("control character in a chunk extension");
        else if (++this.ext > MAX_CHUNK_EXT_BYTES) throw fail(`chunk extensions longer than ${MAX_CHUNK_EXT_BYTES} bytes`);
        return;
      case S.SizeLf:
        if (c !== LF) throw fail("chunk size line not ended by CRLF");
        this.digits = 0;
        this.ext = 0;
        this.s = this.size === 0 ? S.TrailerStart : S.Data;
        return;
      case S.DataCr:
        if (c !== CR) throw fail("chunk data not followed by CRLF");
        this.s = S.DataLf;
        return;
      case S.DataLf:
        if (c !== LF) throw fail("chunk data not followed by CRLF");
        this.s = S.Size;
        return;
      case S.TrailerStart:
        if (c === CR) this.s = S.EndLf;
        else if (TOKEN[c]) this.s = S.TrailerName;
        else throw fail(isWs(c) ? "obs-fold in the trailer section" : "malformed trailer line");
        break;
      case S.TrailerName:
        if (c === 0x3a) this.s = S.TrailerValue;
        else if (!TOKEN[c]) throw fail("malformed trailer line");
        break;
      case S.TrailerValue:
        if (c === CR) this.s = S.TrailerLf;
        else if (c === LF) throw fail("bare LF in the trailer section");
        else if (!isText(c)) throw fail("control character in a trailer");
        break;
      case S.TrailerLf:
        if (c !== LF) throw fail("trailer line not ended by CRLF");
        this.s = S.TrailerStart;
        break;
      case S.EndLf:
        if (c !== LF) throw fail("chunked body not ended by CRLF");
        this.s = S.Done;
        return;
    }
    // Trailer bytes only (the cases that break out of the switch).
    if (++this.trailer > MAX_TRAILER_BYTES) throw fail(`trailer section larger than ${MAX_TRAILER_BYTES} bytes`);
  }
}

/** The decoder for a head's framing (`none` is an empty, already complete body). */
export function bodyDecoder(f: BodyFraming): BodyDecoder {
  switch (f.kind) {
    case "none":
      return new LengthDecoder(0);
    case "length":
      return new LengthDecoder(f.length);
    case "chunked":
      return new ChunkedDecoder();
    case "close":
      return new CloseDecoder();
  }
}
