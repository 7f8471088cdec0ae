// The TLS front's view of the requests on one connection (docs/serving.md "Secure serving"): it finds each request
// head, rewrites it (adds the connection's secret, escapes identity header values, drops a client's copies of the
// internal headers) and passes the body through by its framing (Content-Length or chunked), so the next head is found
// again. A head the front will not forward (asterisk or authority form, CONNECT, an ambiguous or oversized body, a
// malformed or oversized head) is replaced by one refusal request that the internal handler answers with a Kubernetes
// Status; everything the client sends after it is dropped and the connection closes after that answer.
// Only bytes from the client go through here; responses are piped untouched.
import { CONNECTION_HEADER, INTERNAL_HEADERS, REFUSED_HEADER, escapeHeaderValue } from "./internal-headers.ts";

/** A head larger than this is refused: Bun's own limit is 16 KiB, and the front's additions must still fit under it. */
export const MAX_HEAD_BYTES = 15 * 1024;
const MAX_CHUNK_LINE = 4096;
const CRLF = Buffer.from("\r\n");
const CRLFCRLF = Buffer.from("\r\n\r\n");

export interface FramerOptions {
  /** The connection's secret (added to every forwarded head). */
  secret: string;
  /** Largest request body accepted (bytes); a declared Content-Length over it is refused with 413. */
  maxBodyBytes: number;
  /** Lower-cased header name → whether its values carry identity (escaped so each line stays one value). */
  isIdentityHeader: (lowerName: string) => boolean;
}

export interface Refusal {
  code: number;
  message: string;
}

type State =
  | { at: "head" }
  | { at: "body"; left: number }
  | { at: "chunk-size" }
  | { at: "chunk-data"; left: number }
  | { at: "chunk-crlf"; left: number }
  | { at: "trailer" }
  | { at: "refused" }
  | { at: "broken" };

export class RequestFramer {
  private state: State = { at: "head" };
  private pending: Buffer = Buffer.alloc(0);

  private readonly connectionLine: Buffer;

  constructor(private readonly o: FramerOptions) {
    this.connectionLine = Buffer.from(`${CONNECTION_HEADER}: ${o.secret}\r\n`, "latin1");
  }

  /** True once a refusal was forwarded or the body framing broke: nothing more goes upstream. */
  get done(): boolean {
    return this.state.at === "refused" || this.state.at === "broken";
  }

  /** True when the body framing broke after its head went upstream: the connection must be dropped. */
  get broken(): boolean {
    return this.state.at === "broken";
  }

  /** The bytes to send upstream for this chunk from the client (possibly empty). */
  feed(chunk: Buffer): Buffer {
    let buf = this.pending.length ? Buffer.concat([this.pending, chunk]) : chunk;
    this.pending = Buffer.alloc(0);
    const out: Buffer[] = [];
    while (buf.length > 0 && !this.done) {
      const s = this.state;
      if (s.at === "head") {
        const end = buf.indexOf(CRLFCRLF);
        if (end < 0) {
          if (buf.length > MAX_HEAD_BYTES) out.push(this.refuse({ code: 431, message: `request header fields exceed ${MAX_HEAD_BYTES} bytes` }));
          else this.pending = buf;
          break;
        }
        if (end + 4 > MAX_HEAD_BYTES) {
          out.push(this.refuse({ code: 431, message: `request header fields exceed ${MAX_HEAD_BYTES} bytes` }));
          break;
        }
        const head = this.rewriteHead(buf.subarray(0, end).toString("latin1"));
        if ("code" in head) {
          out.push(this.refuse(head));
          break;
        }
        if (head.text === undefined) {
          // Nothing to change but the added line: the head's own bytes around it, no re-encoding.
          out.push(buf.subarray(0, head.requestLineEnd), this.connectionLine, buf.subarray(head.requestLineEnd, end + 4));
        } else {
          out.push(Buffer.from(head.text, "latin1"));
        }
        buf = buf.subarray(end + 4);
        this.state = head.chunked ? { at: "chunk-size" } : head.length > 0 ? { at: "body", left: head.length } : { at: "head" };
      } else if (s.at === "body" || s.at === "chunk-data" || s.at === "chunk-crlf") {
        const n = Math.min(s.left, buf.length);
        const piece = buf.subarray(0, n);
        if (s.at === "chunk-crlf" && !CRLF.subarray(2 - s.left, 2 - s.left + n).equals(piece)) {
          this.state = { at: "broken" };
          break;
        }
        out.push(piece);
        buf = buf.subarray(n);
        const left = s.left - n;
        if (left > 0) this.state = { ...s, left };
        else this.state = s.at === "body" ? { at: "head" } : s.at === "chunk-data" ? { at: "chunk-crlf", left: 2 } : { at: "chunk-size" };
      } else if (s.at === "chunk-size" || s.at === "trailer") {
        const lf = buf.indexOf(0x0a);
        if (lf < 0) {
          if (buf.length > MAX_CHUNK_LINE) this.state = { at: "broken" };
          else this.pending = buf;
          break;
        }
        const line = buf.subarray(0, lf + 1).toString("latin1");
        if (!line.endsWith("\r\n")) {
          this.state = { at: "broken" };
          break;
        }
        out.push(buf.subarray(0, lf + 1));
        buf = buf.subarray(lf + 1);
        if (s.at === "trailer") {
          if (line === "\r\n") this.state = { at: "head" };
          continue;
        }
        const m = /^([0-9a-fA-F]{1,12})(;[^\r\n]*)?\r\n$/.exec(line);
        if (!m) {
          this.state = { at: "broken" };
          break;
        }
        const size = parseInt(m[1]!, 16);
        this.state = size === 0 ? { at: "trailer" } : { at: "chunk-data", left: size };
      } else {
        break;
      }
    }
    return out.length === 1 ? out[0]! : Buffer.concat(out);
  }

  private refuse(r: Refusal): Buffer {
    this.state = { at: "refused" };
    const msg = `${r.code} ${r.message}`.replace(/[^\x20-\x7e]/g, "?");
    return Buffer.from(`GET / HTTP/1.1\r\nhost: localhost\r\n${CONNECTION_HEADER}: ${this.o.secret}\r\n${REFUSED_HEADER}: ${msg}\r\nconnection: close\r\n\r\n`, "latin1");
  }

  /**
   * The head's framing, and its rewritten text when a line had to change (`text` undefined: only the connection line
   * is added, after the request line, which ends at byte `requestLineEnd` including its CRLF).
   */
  private rewriteHead(head: string): { text?: string; requestLineEnd: number; length: number; chunked: boolean } | Refusal {
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
    const change = (i: number) => (kept ??= [requestLine, `${CONNECTION_HEADER}: ${this.o.secret}`, ...lines.slice(1, i)]);
    let length: number | undefined;
    let te: string | undefined;
    for (let i = 1; i < lines.length; i++) {
      const line = lines[i]!;
      const colon = line.indexOf(":");
      if (colon <= 0) return { code: 400, message: "malformed header line" };
      const raw = line.slice(0, colon);
      if (raw.indexOf(" ") >= 0 || raw.indexOf("\t") >= 0) return { code: 400, message: "malformed header line" };
      const name = raw.toLowerCase();
      if (INTERNAL_HEADERS.has(name)) {
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
      } else if (this.o.isIdentityHeader(name) && (line.indexOf(",", colon) >= 0 || line.indexOf("%", colon) >= 0)) {
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
    const framing = { requestLineEnd: requestLine.length + 2, length: length ?? 0, chunked: te === "chunked" };
    return kept ? { ...framing, text: `${kept.join("\r\n")}\r\n\r\n` } : framing;
  }
}
