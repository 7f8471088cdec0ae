// Small, closed HTTP/1.1 exchanges over an already-open tunnel socket: the e2b surface's own envd calls (/init,
// /metrics, /envs). The relay's streaming guest leg is h1.ts.
import type http from "node:http";
import type net from "node:net";
import type { Socket } from "bun";
import { endpointOf, openTunnel, relayReply, relayRequest, TunnelUnreachable, type TunnelTarget } from "./tunnel.ts";

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
type SmallExchange = TunnelRequest & { body?: string; timeoutMs: number; maxBytes: number };

/** The request bytes of a small exchange: head with `Connection: close` and Content-Length, then the body. */
function requestBytes(r: SmallExchange): Buffer {
  const payload = r.body === undefined ? Buffer.alloc(0) : Buffer.from(r.body);
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(r.headers)) if (v !== undefined) headers[k.toLowerCase()] = Array.isArray(v) ? v.join(", ") : String(v);
  headers.connection = "close";
  headers["content-length"] = String(payload.length);
  let head = `${r.method} ${r.path} HTTP/1.1\r\n`;
  for (const [k, v] of Object.entries(headers)) head += `${k}: ${v}\r\n`;
  return Buffer.concat([Buffer.from(`${head}\r\n`, "latin1"), payload]);
}

/** The reply read so far: undefined while more is needed (and the connection is open), else the reply or why not. */
function smallReply(buf: Buffer, ended: boolean, maxBytes: number): SmallReply | Error | undefined {
  if (buf.length > maxBytes + 16 * 1024) return new Error(`reply larger than ${maxBytes} bytes`);
  const end = buf.indexOf("\r\n\r\n");
  if (end < 0) return ended ? new Error("connection closed before a reply head") : undefined;
  const lines = buf.subarray(0, end).toString("latin1").split("\r\n");
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(lines[0] ?? "")?.[1] ?? NaN);
  if (!Number.isInteger(status)) return new Error("reply is not HTTP/1.x");
  const lengthLine = lines.find((l) => /^content-length:/i.test(l));
  const chunked = lines.some((l) => /^transfer-encoding:.*chunked/i.test(l));
  const bodyBytes = buf.subarray(end + 4);
  if (lengthLine) {
    const len = Number(lengthLine.slice(lengthLine.indexOf(":") + 1).trim());
    if (bodyBytes.length >= len) return { status, body: Buffer.from(bodyBytes.subarray(0, len)) };
  } else if (status === 204 || status === 304) {
    return { status, body: Buffer.alloc(0) };
  } else if (chunked) {
    const decoded = dechunk(bodyBytes);
    if (decoded) return { status, body: decoded };
  }
  if (!ended) return undefined;
  return lengthLine || chunked ? new Error("reply truncated") : { status, body: Buffer.from(bodyBytes) };
}

/**
 * A whole small exchange (envd `/init`, `/metrics`): send `body` with `Connection: close`, read at most `maxBytes`
 * of reply within `timeoutMs`. Written by hand rather than through node:http: it sits on the create path, and a
 * closed, length-bounded exchange needs no framing beyond Content-Length or the close itself.
 */
export function exchangeOverSocket(sock: net.Socket, r: SmallExchange): Promise<SmallReply> {
  return new Promise<SmallReply>((resolve, reject) => {
    let buf: Buffer = Buffer.alloc(0);
    let settled = false;
    const finish = (out: SmallReply | Error) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      sock.destroy();
      if (out instanceof Error) reject(out);
      else resolve(out);
    };
    const timer = setTimeout(() => finish(new Error(`no reply within ${r.timeoutMs} ms`)), r.timeoutMs);
    const step = (ended: boolean) => {
      const out = smallReply(buf, ended, r.maxBytes);
      if (out !== undefined) finish(out);
    };
    sock.on("data", (c: Buffer) => {
      buf = buf.length ? Buffer.concat([buf, c]) : c;
      step(false);
    });
    sock.once("end", () => step(true));
    sock.once("error", (err) => finish(err));
    sock.resume();
    sock.write(requestBytes(r));
  });
}

/**
 * Open a ports relay and run one small exchange over it (the e2b surface's envd calls). A plain-TCP node is dialled
 * with Bun's own socket API: on the create path it costs ~0.1 ms less per call than node:net (measured, see
 * docs/envd-relay.md "Performance"). A TLS node goes through openTunnel's node:tls dial. Errors are those of
 * openTunnel (TunnelRefused with the node's status, TunnelUnreachable) and of exchangeOverSocket.
 */
export async function exchangeOverTunnel(t: TunnelTarget, r: SmallExchange, o: { signal?: AbortSignal } = {}): Promise<SmallReply> {
  const ep = endpointOf(t.address);
  if (ep.secure) return exchangeOverSocket(await openTunnel(t, { dialTimeoutMs: r.timeoutMs, ...(o.signal ? { signal: o.signal } : {}) }), r);
  return new Promise<SmallReply>((resolve, reject) => {
    let sock: Socket | undefined;
    let settled = false;
    let upgraded = false;
    let buf: Buffer = Buffer.alloc(0);
    let unsent: Buffer | undefined;
    const finish = (out: SmallReply | Error) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      o.signal?.removeEventListener("abort", onAbort);
      sock?.terminate();
      if (out instanceof Error) reject(out);
      else resolve(out);
    };
    // The dial and handshake get `timeoutMs` (as openTunnel's dial), then the reply gets its own (as exchangeOverSocket).
    let timer = setTimeout(() => finish(new TunnelUnreachable("ports relay handshake timed out")), r.timeoutMs);
    const onAbort = () => finish(new TunnelUnreachable("ports relay dial aborted"));
    if (o.signal?.aborted) return finish(new TunnelUnreachable("ports relay dial aborted"));
    o.signal?.addEventListener("abort", onAbort, { once: true });
    const send = (s: Socket, bytes: Buffer) => {
      const n = s.write(bytes);
      unsent = n < bytes.length ? bytes.subarray(Math.max(n, 0)) : undefined;
    };
    const onBytes = (s: Socket, ended: boolean) => {
      if (settled) return;
      if (!upgraded) {
        const h = relayReply(buf);
        if (h === undefined) return ended ? finish(new TunnelUnreachable("node closed the connection during the ports relay handshake")) : undefined;
        if ("error" in h) return finish(h.error);
        upgraded = true;
        clearTimeout(timer);
        timer = setTimeout(() => finish(new Error(`no reply within ${r.timeoutMs} ms`)), r.timeoutMs);
        buf = h.rest;
        send(s, requestBytes(r));
      }
      const out = smallReply(buf, ended, r.maxBytes);
      if (out !== undefined) finish(out);
    };
    Bun.connect({
      hostname: ep.host,
      port: ep.port,
      socket: {
        open(s) {
          sock = s;
          if (settled) return s.terminate();
          s.setNoDelay(true);
          send(s, Buffer.from(relayRequest(t, ep.authority), "latin1"));
        },
        data(s, chunk) {
          buf = buf.length ? Buffer.concat([buf, chunk]) : chunk;
          onBytes(s, false);
        },
        drain(s) {
          if (unsent) send(s, unsent);
        },
        end(s) {
          onBytes(s, true);
        },
        close(s) {
          onBytes(s, true);
        },
        error(_s, err) {
          finish(upgraded ? err : new TunnelUnreachable(`ports relay dial failed: ${err.message}`, { cause: err }));
        },
        connectError(_s, err) {
          finish(new TunnelUnreachable(`ports relay dial failed: ${err.message}`, { cause: err }));
        },
      },
    }).catch((err: Error) => finish(new TunnelUnreachable(`ports relay dial failed: ${err.message}`, { cause: err })));
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
