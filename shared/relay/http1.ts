// Small, closed HTTP/1.1 exchanges over an already-open tunnel socket: the e2b surface's own envd calls (/init,
// /metrics, /envs). The relay's streaming guest leg is h1.ts.
import type http from "node:http";
import type net from "node:net";

export interface TunnelRequest {
  method: string;
  /** Path and query, untouched. */
  path: string;
  headers: http.OutgoingHttpHeaders;
}

export interface SmallReply {
  status: number;
  body: Buffer;
}

/**
 * A whole small exchange (envd `/init`, `/metrics`): send `body` with `Connection: close`, read at most `maxBytes`
 * of reply within `timeoutMs`. Written by hand rather than through node:http: it sits on the create path, and a
 * closed, length-bounded exchange needs no framing beyond Content-Length or the close itself.
 */
export function exchangeOverSocket(
  sock: net.Socket,
  r: TunnelRequest & { body?: string; timeoutMs: number; maxBytes: number },
): Promise<SmallReply> {
  return new Promise<SmallReply>((resolve, reject) => {
    const payload = r.body === undefined ? Buffer.alloc(0) : Buffer.from(r.body);
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(r.headers)) if (v !== undefined) headers[k.toLowerCase()] = Array.isArray(v) ? v.join(", ") : String(v);
    headers.connection = "close";
    headers["content-length"] = String(payload.length);
    let head = `${r.method} ${r.path} HTTP/1.1\r\n`;
    for (const [k, v] of Object.entries(headers)) head += `${k}: ${v}\r\n`;
    let buf: Buffer = Buffer.alloc(0);
    let settled = false;
    const finish = (err: Error | null, reply?: SmallReply) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      sock.destroy();
      if (err) reject(err);
      else resolve(reply!);
    };
    const timer = setTimeout(() => finish(new Error(`no reply within ${r.timeoutMs} ms`)), r.timeoutMs);
    const tryParse = (ended: boolean) => {
      const end = buf.indexOf("\r\n\r\n");
      if (end < 0) return ended ? finish(new Error("connection closed before a reply head")) : undefined;
      const lines = buf.subarray(0, end).toString("latin1").split("\r\n");
      const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(lines[0] ?? "")?.[1] ?? NaN);
      if (!Number.isInteger(status)) return finish(new Error("reply is not HTTP/1.x"));
      const lengthLine = lines.find((l) => /^content-length:/i.test(l));
      const chunked = lines.some((l) => /^transfer-encoding:.*chunked/i.test(l));
      const bodyBytes = buf.subarray(end + 4);
      if (lengthLine) {
        const len = Number(lengthLine.slice(lengthLine.indexOf(":") + 1).trim());
        if (bodyBytes.length >= len) return finish(null, { status, body: Buffer.from(bodyBytes.subarray(0, len)) });
      } else if (status === 204 || status === 304) {
        return finish(null, { status, body: Buffer.alloc(0) });
      } else if (chunked) {
        const decoded = dechunk(bodyBytes);
        if (decoded) return finish(null, { status, body: decoded });
      }
      if (ended) return lengthLine || chunked ? finish(new Error("reply truncated")) : finish(null, { status, body: Buffer.from(bodyBytes) });
    };
    sock.on("data", (c: Buffer) => {
      buf = buf.length ? Buffer.concat([buf, c]) : c;
      if (buf.length > r.maxBytes + 16 * 1024) return finish(new Error(`reply larger than ${r.maxBytes} bytes`));
      tryParse(false);
    });
    sock.once("end", () => tryParse(true));
    sock.once("error", (err) => finish(err));
    sock.resume();
    sock.write(Buffer.concat([Buffer.from(`${head}\r\n`, "latin1"), payload]));
  });
}

/** A complete chunked body, or undefined while chunks are still missing. */
function dechunk(b: Buffer): Buffer | undefined {
  const parts: Buffer[] = [];
  let i = 0;
  for (;;) {
    const eol = b.indexOf("\r\n", i);
    if (eol < 0) return undefined;
    const size = parseInt(b.subarray(i, eol).toString("latin1").split(";")[0]!, 16);
    if (Number.isNaN(size)) return undefined;
    if (size === 0) return Buffer.concat(parts);
    if (b.length < eol + 2 + size + 2) return undefined;
    parts.push(b.subarray(eol + 2, eol + 2 + size));
    i = eol + 2 + size + 2;
  }
}
