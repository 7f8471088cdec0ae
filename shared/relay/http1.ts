// HTTP/1.1 over an already-open tunnel socket (node:http with `createConnection`, so chunked framing, trailers and
// backpressure are node's, not ours). Used for the guest leg of the relay and for the e2b surface's own envd calls.
import http from "node:http";
import type net from "node:net";

export interface TunnelRequest {
  method: string;
  /** Path and query, untouched. */
  path: string;
  headers: http.OutgoingHttpHeaders;
}

/** Start a request on the socket; the caller writes (or pipes) the body and ends it. One request per socket. */
export function requestOverSocket(sock: net.Socket, r: TunnelRequest): http.ClientRequest {
  const req = http.request({
    method: r.method,
    path: r.path,
    headers: r.headers,
    // No `agent: false`: under Bun that makes node:http ignore createConnection and dial host:80 itself.
    createConnection: () => {
      sock.resume();
      return sock;
    },
  });
  req.shouldKeepAlive = false;
  return req;
}

export interface SmallReply {
  status: number;
  body: Buffer;
}

/**
 * A whole small exchange (envd `/init`, `/metrics`): send `body`, read at most `maxBytes` of reply within
 * `timeoutMs`. Rejects on timeout, on an oversize reply, or when the socket breaks.
 */
export function exchangeOverSocket(
  sock: net.Socket,
  r: TunnelRequest & { body?: string; timeoutMs: number; maxBytes: number },
): Promise<SmallReply> {
  return new Promise<SmallReply>((resolve, reject) => {
    const payload = r.body === undefined ? undefined : Buffer.from(r.body);
    const req = requestOverSocket(sock, {
      ...r,
      headers: { ...r.headers, connection: "close", ...(payload ? { "content-length": String(payload.length) } : {}) },
    });
    const timer = setTimeout(() => {
      req.destroy(new Error(`no reply within ${r.timeoutMs} ms`));
    }, r.timeoutMs);
    const done = (err: Error | null, reply?: SmallReply) => {
      clearTimeout(timer);
      sock.destroy();
      if (err) reject(err);
      else resolve(reply!);
    };
    req.once("error", (err) => done(err));
    req.once("response", (res) => {
      const parts: Buffer[] = [];
      let size = 0;
      res.on("data", (c: Buffer) => {
        size += c.length;
        if (size > r.maxBytes) {
          res.destroy();
          done(new Error(`reply larger than ${r.maxBytes} bytes`));
          return;
        }
        parts.push(c);
      });
      res.once("end", () => done(null, { status: res.statusCode ?? 0, body: Buffer.concat(parts) }));
      res.once("error", (err) => done(err));
    });
    req.end(payload);
  });
}
