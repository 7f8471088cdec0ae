// The response head of one HTTP/1.1 exchange, read incrementally from untrusted guest bytes (docs/envd-relay.md
// "Framing"): CRLF line ends only (a bare LF or CR, or a NUL, is refused as it arrives), a bounded size and header
// count, a status line `HTTP/1.x NNN reason` with NNN in 100..599, no obs-fold, token header names, and one
// unambiguous body framing (see `framingOf`). Interim 1xx heads are skipped; 101 is final when an upgrade was asked
// (the relay's WebSocket handshake), else refused.
import { FramingError } from "./error.ts";
import { MAX_HEAD_BYTES, MAX_HEADER_COUNT, MAX_INTERIM_HEADS, MAX_LENGTH_DIGITS } from "./limits.ts";

/** How the body after the head is delimited. */
export type BodyFraming = { kind: "none" } | { kind: "length"; length: number } | { kind: "chunked" } | { kind: "close" };

export interface ResponseHead {
  status: number;
  /** Every header line in order, names lowercased, values trimmed of surrounding whitespace. */
  headers: [string, string][];
  framing: BodyFraming;
}

export interface HeadDone {
  head: ResponseHead;
  /** Bytes after the head: the start of the body. */
  rest: Buffer;
}

const EMPTY = Buffer.alloc(0);
const CR = 0x0d;
const LF = 0x0a;
const STATUS_LINE = /^HTTP\/1\.([01]) ([0-9]{3})(?: [\t\x20-\x7e\x80-\xff]*)?$/;
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const CONTROL = /[\x01-\x08\x0b\x0c\x0e-\x1f\x7f]/;
const fail = (message: string) => new FramingError(message, "head");

/** Status codes a final response may carry (RFC 9110 §15: three digits, 100..599; 1xx are interim). */
export const isValidStatus = (status: number) => Number.isInteger(status) && status >= 100 && status <= 599;

/** Content-Length as a safe integer: decimal digits only (no sign, no list, no whitespace inside). */
export function parseContentLength(text: string): number {
  if (!/^[0-9]+$/.test(text) || text.length > MAX_LENGTH_DIGITS) throw fail(`invalid Content-Length ${JSON.stringify(text.slice(0, 32))}`);
  return Number(text);
}

/** The body framing a final head declares; conflicting or unsupported framing is refused rather than guessed. */
export function framingOf(method: string, status: number, headers: readonly [string, string][]): BodyFraming {
  const lengths: string[] = [];
  const encodings: string[] = [];
  for (const [k, v] of headers) {
    if (k === "content-length") lengths.push(v);
    else if (k === "transfer-encoding") encodings.push(v);
  }
  if (lengths.length > 1) throw fail("duplicate Content-Length");
  if (encodings.length > 1) throw fail("duplicate Transfer-Encoding");
  if (lengths.length && encodings.length) throw fail("both Content-Length and Transfer-Encoding");
  const length = lengths.length ? parseContentLength(lengths[0]!) : undefined;
  if (encodings.length && encodings[0]!.toLowerCase() !== "chunked") throw fail(`unsupported Transfer-Encoding ${JSON.stringify(encodings[0]!.slice(0, 32))}`);
  if (method === "HEAD" || status === 204 || status === 304) return { kind: "none" };
  if (encodings.length) return { kind: "chunked" };
  if (length !== undefined) return { kind: "length", length };
  return { kind: "close" };
}

/** Drop optional whitespace (SP, HTAB) around a field value. */
function trimOws(v: string): string {
  let a = 0;
  let b = v.length;
  while (a < b && (v.charCodeAt(a) === 0x20 || v.charCodeAt(a) === 0x09)) a++;
  while (b > a && (v.charCodeAt(b - 1) === 0x20 || v.charCodeAt(b - 1) === 0x09)) b--;
  return v.slice(a, b);
}

function parseHead(text: string): { status: number; headers: [string, string][] } {
  // CR, LF and NUL were checked by the scan; any other control character anywhere in the head is refused.
  if (CONTROL.test(text)) throw fail("control character in the response head");
  const lines = text.split("\r\n");
  const m = STATUS_LINE.exec(lines[0]!);
  if (!m) throw fail("the status line is not HTTP/1.x NNN");
  const status = Number(m[2]);
  if (!isValidStatus(status)) throw fail(`status ${m[2]} is outside 100..599`);
  const headers: [string, string][] = [];
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i]!;
    const colon = line.indexOf(":");
    const name = colon > 0 ? line.slice(0, colon) : "";
    if (!TOKEN.test(name)) throw fail(line.startsWith(" ") || line.startsWith("\t") ? "obs-fold header continuation" : "malformed header line");
    headers.push([name.toLowerCase(), trimOws(line.slice(colon + 1))]);
  }
  return { status, headers };
}

/**
 * Feed the guest's bytes as they arrive; `feed` returns the final head (and the bytes after it) once complete.
 * Scans each byte once and copies only when a head spans reads (a doubling buffer, so a head sent byte by byte
 * costs linear time). Throws FramingError as soon as a violation or a bound is reached.
 */
export class ResponseHeadReader {
  private store: Buffer = EMPTY;
  private len = 0;
  /** Bytes of `store` already scanned. */
  private scanned = 0;
  /** Head bytes of earlier interim heads. */
  private consumed = 0;
  private interim = 0;
  private prev = -1;
  private lineLen = 0;
  private lines = 0;

  /**
   * `upgrade`: the request asked for a protocol switch (a WebSocket handshake), so a `101` is the final head (its
   * framing `none`: what follows is the new protocol's bytes) instead of a violation.
   */
  constructor(
    private readonly method: string,
    private readonly o: { upgrade?: boolean } = {},
  ) {}

  /** Bytes of a head not yet complete have arrived (a deadline on finishing the head runs while this holds). */
  get started(): boolean {
    return this.len > 0;
  }

  /** Interim (1xx) heads read so far: each one complete restarts a head deadline. */
  get interimHeads(): number {
    return this.interim;
  }

  feed(chunk: Buffer): HeadDone | undefined {
    let data: Buffer;
    if (this.len === 0) {
      data = chunk;
    } else {
      this.append(chunk);
      data = this.store.subarray(0, this.len);
    }
    for (;;) {
      const end = this.scan(data);
      if (end < 0) {
        if (data === chunk) this.keep(chunk);
        return undefined;
      }
      // (A head that is only its blank line, end = 2, has an empty status line.)
      const { status, headers } = parseHead(data.subarray(0, Math.max(0, end - 4)).toString("latin1"));
      const rest = data.subarray(end);
      if (status >= 200) {
        this.len = 0;
        return { head: { status, headers, framing: framingOf(this.method, status, headers) }, rest };
      }
      if (status === 101) {
        if (!this.o.upgrade) throw fail("101 Switching Protocols without an upgrade request");
        this.len = 0;
        return { head: { status, headers, framing: { kind: "none" } }, rest };
      }
      if (++this.interim > MAX_INTERIM_HEADS) throw fail(`more than ${MAX_INTERIM_HEADS} interim responses`);
      this.consumed += end;
      this.prev = -1;
      this.lineLen = 0;
      this.lines = 0;
      this.scanned = 0;
      this.len = 0;
      data = rest;
      chunk = rest;
    }
  }

  /** The connection ended before a final head. */
  end(): never {
    throw fail(this.len === 0 && this.consumed === 0 ? "closed before a response head" : "closed in the middle of the response head");
  }

  /** Index just past the blank line ending the head, or -1 when more bytes are needed. */
  private scan(data: Buffer): number {
    let prev = this.prev;
    let lineLen = this.lineLen;
    const limit = MAX_HEAD_BYTES - this.consumed;
    for (let i = this.scanned; i < data.length; i++) {
      if (i >= limit) throw fail(`response head larger than ${MAX_HEAD_BYTES} bytes`);
      const b = data[i]!;
      if (b === 0) throw fail("NUL in the response head");
      if (prev === CR && b !== LF) throw fail("bare CR in the response head");
      if (b === LF) {
        if (prev !== CR) throw fail("bare LF in the response head");
        if (lineLen === 0) {
          this.prev = -1;
          this.lineLen = 0;
          this.scanned = 0;
          return i + 1;
        }
        lineLen = 0;
        if (++this.lines > MAX_HEADER_COUNT) throw fail(`more than ${MAX_HEADER_COUNT} header lines`);
      } else if (b !== CR) {
        lineLen++;
      }
      prev = b;
    }
    this.prev = prev;
    this.lineLen = lineLen;
    this.scanned = data.length;
    return -1;
  }

  private keep(chunk: Buffer): void {
    this.len = 0;
    this.append(chunk);
  }

  private append(chunk: Buffer): void {
    const need = this.len + chunk.length;
    if (need > this.store.length) {
      const grown = Buffer.allocUnsafe(Math.max(need, Math.min(this.store.length * 2, MAX_HEAD_BYTES), 1024));
      this.store.copy(grown, 0, 0, this.len);
      this.store = grown;
    }
    chunk.copy(this.store, this.len);
    this.len = need;
  }
}
