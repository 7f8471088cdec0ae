// The TLS front's view of the requests on one connection (front.ts): it finds each request
// head, rewrites it (adds the connection's secret, escapes identity header values, drops a client's copies of the
// internal headers) and passes the body through by its framing (Content-Length or chunked), so the next head is found
// again. A head the front will not forward (asterisk or authority form, CONNECT, an ambiguous or oversized body, a
// malformed or oversized head) is replaced by one refusal request that the internal handler answers with a Kubernetes
// Status; everything the client sends after it is dropped and the connection closes after that answer.
// Only bytes from the client go through here; responses are piped untouched.
import { type InternalHeaders, escapeHeaderValue } from "./internal-headers.ts";

/** A head larger than this is refused: Bun's own limit is 16 KiB, and the front's additions must still fit under it. */
export const MAX_HEAD_BYTES = 15 * 1024;
const MAX_CHUNK_LINE = 4096;
const CRLFCRLF = Buffer.from("\r\n\r\n");
/** Name lengths of the headers the front reads or drops: content-length, transfer-encoding, the internal ones. */
const specialNameLengths = (h: InternalHeaders): ReadonlySet<number> => new Set(["content-length", "transfer-encoding", ...h.all].map((n) => n.length));
/** Computed once per front (framers of one front share its headers object). */
const LENGTHS = new WeakMap<InternalHeaders, ReadonlySet<number>>();

export interface FramerOptions {
  /** The connection's secret (added to every forwarded head). */
  secret: string;
  /** The front's internal header names (internal-headers.ts). */
  headers: InternalHeaders;
  /** Largest request body accepted (bytes); a declared Content-Length over it is refused with 413. */
  maxBodyBytes: number;
  /** Lower-cased header name → whether its values carry identity (escaped so each line stays one value). */
  isIdentityHeader?: (lowerName: string) => boolean;
  /** Each forwarded head's method is appended here (the front's response tracker, keep-alive.ts, takes them). */
  methods?: string[];
}

export interface Refusal {
  code: number;
  message: string;
}

type At = "head" | "body" | "chunk-size" | "chunk-data" | "chunk-crlf" | "trailer" | "refused" | "broken";

/** A hex digit's value, or -1. */
function hexValue(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x61 && c <= 0x66) return c - 0x57;
  if (c >= 0x41 && c <= 0x46) return c - 0x37;
  return -1;
}

export class RequestFramer {
  private at: At = "head";
  /** Bytes left in the body, the chunk's data, or the chunk's CRLF. */
  private left = 0;
  private pending: Buffer = Buffer.alloc(0);
  private heads = 0;

  private readonly connectionLine: Buffer;
  private readonly specialLengths: ReadonlySet<number>;

  constructor(private readonly o: FramerOptions) {
    this.connectionLine = Buffer.from(`${o.headers.connection}: ${o.secret}\r\n`, "latin1");
    let lengths = LENGTHS.get(o.headers);
    if (!lengths) LENGTHS.set(o.headers, (lengths = specialNameLengths(o.headers)));
    this.specialLengths = lengths;
  }

  /** True once a refusal was forwarded or the body framing broke: nothing more goes upstream. */
  get done(): boolean {
    return this.at === "refused" || this.at === "broken";
  }

  /** How many heads went upstream (refusals included): a change means a head was completed. */
  get headsForwarded(): number {
    return this.heads;
  }

  /** True while part of a head has arrived and its end has not: the front's header deadline runs. */
  get readingHead(): boolean {
    return this.at === "head" && this.pending.length > 0;
  }

  /** True when the body framing broke after its head went upstream: the connection must be dropped. */
  get broken(): boolean {
    return this.at === "broken";
  }

  /**
   * The bytes to send upstream for this chunk from the client (possibly empty). A cursor walks the bytes once; body
   * bytes are passed as slices of the input, and only an unfinished head or chunk line is kept for the next chunk.
   */
  feed(chunk: Buffer): Buffer {
    const buf = this.pending.length ? Buffer.concat([this.pending, chunk]) : chunk;
    this.pending = Buffer.alloc(0);
    const out: Buffer[] = [];
    let pos = 0;
    /** Start of the bytes passed through unchanged since the last head or kept line. */
    let from = 0;
    const flush = () => {
      if (pos > from) out.push(buf.subarray(from, pos));
      from = pos;
    };
    const keep = () => {
      flush();
      this.pending = buf.subarray(pos);
      pos = from = buf.length;
    };
    while (pos < buf.length && !this.done) {
      const at = this.at;
      if (at === "head") {
        const end = buf.indexOf(CRLFCRLF, pos);
        if (end < 0 || end + 4 - pos > MAX_HEAD_BYTES) {
          if (end < 0 && buf.length - pos <= MAX_HEAD_BYTES) {
            keep();
            break;
          }
          flush();
          out.push(this.refuse({ code: 431, message: `request header fields exceed ${MAX_HEAD_BYTES} bytes` }));
          break;
        }
        flush();
        const head = this.rewriteHead(buf.subarray(pos, end).toString("latin1"));
        if ("code" in head) {
          out.push(this.refuse(head));
          break;
        }
        if (head.text === undefined) {
          // Nothing to change but the added line: the head's own bytes around it, no re-encoding.
          out.push(buf.subarray(pos, pos + head.requestLineEnd), this.connectionLine, buf.subarray(pos + head.requestLineEnd, end + 4));
        } else {
          out.push(Buffer.from(head.text, "latin1"));
        }
        pos = from = end + 4;
        this.heads++;
        this.o.methods?.push(head.method);
        if (head.chunked) this.at = "chunk-size";
        else if (head.length > 0) {
          this.at = "body";
          this.left = head.length;
        }
      } else if (at === "body" || at === "chunk-data") {
        const n = Math.min(this.left, buf.length - pos);
        pos += n;
        this.left -= n;
        if (this.left === 0) {
          this.at = at === "body" ? "head" : "chunk-crlf";
          this.left = 2;
        }
      } else if (at === "chunk-crlf") {
        if (buf[pos] !== (this.left === 2 ? 0x0d : 0x0a)) {
          this.at = "broken";
          break;
        }
        pos++;
        if (--this.left === 0) this.at = "chunk-size";
      } else {
        // chunk-size or trailer: one CRLF-terminated line.
        const lf = buf.indexOf(0x0a, pos);
        if (lf < 0) {
          if (buf.length - pos > MAX_CHUNK_LINE) this.at = "broken";
          else keep();
          break;
        }
        if (lf === pos || buf[lf - 1] !== 0x0d || lf - pos > MAX_CHUNK_LINE) {
          this.at = "broken";
          break;
        }
        if (at === "trailer") {
          if (lf === pos + 1) this.at = "head"; // the empty line ends the body
          pos = lf + 1;
          continue;
        }
        let size = 0;
        let i = pos;
        for (; i < lf - 1; i++) {
          const v = hexValue(buf[i]!);
          if (v < 0) break;
          size = size * 16 + v;
        }
        const digits = i - pos;
        // Hex digits (at most 12), then the line's end or a chunk extension.
        if (digits === 0 || digits > 12 || (i < lf - 1 && buf[i] !== 0x3b)) {
          this.at = "broken";
          break;
        }
        pos = lf + 1;
        if (size === 0) this.at = "trailer";
        else {
          this.at = "chunk-data";
          this.left = size;
        }
      }
    }
    if (!this.done) flush();
    else if (this.at === "broken") out.length = 0;
    return out.length === 1 ? out[0]! : Buffer.concat(out);
  }

  private refuse(r: Refusal): Buffer {
    this.at = "refused";
    this.heads++;
    this.o.methods?.push("GET");
    const msg = `${r.code} ${r.message}`.replace(/[^\x20-\x7e]/g, "?");
    return Buffer.from(`GET / HTTP/1.1\r\nhost: localhost\r\n${this.o.headers.connection}: ${this.o.secret}\r\n${this.o.headers.refused}: ${msg}\r\nconnection: close\r\n\r\n`, "latin1");
  }

  /**
   * The head's framing, and its rewritten text when a line had to change (`text` undefined: only the connection line
   * is added, after the request line, which ends at byte `requestLineEnd` including its CRLF).
   */
  private rewriteHead(head: string): { text?: string; method: string; requestLineEnd: number; length: number; chunked: boolean } | Refusal {
    // Bare CR or LF, NUL, and folded lines are where two HTTP parsers start to disagree: refused outright.
    if (/[\0]|\r(?!\n)|(?<!\r)\n|\n[ \t]/.test(head)) return { code: 400, message: "malformed request head" };
    const lines = head.split("\r\n");
    const requestLine = lines[0]!;
    const rl = /^([A-Za-z]+) (\S+) HTTP\/1\.[01]$/.exec(requestLine);
    if (!rl) return { code: 400, message: "malformed request line" };
    const method = rl[1]!.toUpperCase();
    const target = rl[2]!;
    if (method === "CONNECT") return { code: 405, message: "CONNECT is not supported" };
    if (target === "*") return { code: 400, message: `the asterisk form ("${method} *") is not supported` };
    if (!target.startsWith("/") && !/^https?:\/\//i.test(target)) return { code: 400, message: "the request target must be an absolute path" };
    /** Built only once a line changes (most heads need none: their bytes are reused as they are). */
    let kept: string[] | undefined;
    const change = (i: number) => (kept ??= [requestLine, `${this.o.headers.connection}: ${this.o.secret}`, ...lines.slice(1, i)]);
    let length: number | undefined;
    let te: string | undefined;
    for (let i = 1; i < lines.length; i++) {
      const line = lines[i]!;
      const colon = line.indexOf(":");
      if (colon <= 0) return { code: 400, message: "malformed header line" };
      const raw = line.slice(0, colon);
      if (raw.indexOf(" ") >= 0 || raw.indexOf("\t") >= 0) return { code: 400, message: "malformed header line" };
      // Only a line whose name has the length of a framing or internal header, or whose value holds `,` or `%`, can
      // matter: every other line is kept as it is without lower-casing its name (the common case, per line).
      const escapable = line.indexOf(",", colon) >= 0 || line.indexOf("%", colon) >= 0;
      if (!escapable && !this.specialLengths.has(colon)) {
        kept?.push(line);
        continue;
      }
      const name = raw.toLowerCase();
      if (this.o.headers.all.has(name)) {
        change(i);
        continue;
      }
      if (name === "content-length") {
        const value = line.slice(colon + 1).trim();
        if (!/^\d{1,15}$/.test(value)) return { code: 400, message: `invalid Content-Length "${value.slice(0, 32)}"` };
        const n = Number(value);
        if (length !== undefined && length !== n) return { code: 400, message: "conflicting Content-Length headers" };
        length = n;
      } else if (name === "transfer-encoding") {
        const value = line.slice(colon + 1).trim().toLowerCase();
        te = te === undefined ? value : `${te}, ${value}`;
      } else if (escapable && this.o.isIdentityHeader?.(name)) {
        change(i).push(`${raw}: ${escapeHeaderValue(line.slice(colon + 1).trim())}`);
        continue;
      }
      kept?.push(line);
    }
    if (te !== undefined && length !== undefined) return { code: 400, message: "both Transfer-Encoding and Content-Length are set" };
    if (te !== undefined && te !== "chunked") return { code: 501, message: `unsupported Transfer-Encoding "${te.slice(0, 32)}"` };
    if (length !== undefined && length > this.o.maxBodyBytes) {
      return { code: 413, message: `the request body is ${length} bytes, over the limit of ${this.o.maxBodyBytes} bytes` };
    }
    const framing = { method, requestLineEnd: requestLine.length + 2, length: length ?? 0, chunked: te === "chunked" };
    return kept ? { ...framing, text: `${kept.join("\r\n")}\r\n\r\n` } : framing;
  }
}
