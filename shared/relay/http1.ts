// Small, closed HTTP/1.1 exchanges over an already-open tunnel socket: the e2b surface's own envd calls (/init,
// /metrics, /envs). The relay's streaming guest leg is h1.ts.
import type http from "node:http";
import type net from "node:net";
import type { Socket } from "bun";
import { WholeReplyReader } from "./framing/index.ts";
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

/** A small exchange: the request, its body, and the bounds of the reply (`timeoutMs`, `maxBytes` of body). */
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

/**
 * The reply read so far, through the framing parser: undefined while more is needed, else the reply or why not
 * (a FramingError for malformed or truncated framing, an oversized body included).
 */
function replyStep(reader: WholeReplyReader, chunk: Buffer | undefined): SmallReply | Error | undefined {
  try {
    const r = chunk === undefined ? reader.end() : reader.feed(chunk);
    return r && { status: r.status, body: r.body };
  } catch (err) {
    return err as Error;
  }
}

/**
 * A whole small exchange (envd `/init`, `/metrics`): send `body` with `Connection: close`, read at most `maxBytes`
 * of reply body within `timeoutMs`. Written by hand rather than through node:http (it sits on the create path); the
 * reply goes through the framing parser (framing/), so a hostile envd can fail this call but not stall the process.
 */
export function exchangeOverSocket(sock: net.Socket, r: SmallExchange): Promise<SmallReply> {
  return new Promise<SmallReply>((resolve, reject) => {
    const reader = new WholeReplyReader(r.method, r.maxBytes);
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
    const step = (chunk: Buffer | undefined) => {
      if (settled) return;
      const out = replyStep(reader, chunk);
      if (out !== undefined) finish(out);
    };
    sock.on("data", (c: Buffer) => step(c));
    sock.once("end", () => step(undefined));
    sock.once("close", () => step(undefined));
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
    const reader = new WholeReplyReader(r.method, r.maxBytes);
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
    // Until the node's 101 the bytes are the ports relay's handshake; after it, each read goes to the reply reader.
    const onBytes = (s: Socket, chunk: Buffer | undefined) => {
      if (settled) return;
      if (!upgraded) {
        if (chunk) buf = buf.length ? Buffer.concat([buf, chunk]) : chunk;
        const h = relayReply(buf);
        if (h === undefined) return chunk ? undefined : finish(new TunnelUnreachable("node closed the connection during the ports relay handshake"));
        if ("error" in h) return finish(h.error);
        upgraded = true;
        clearTimeout(timer);
        timer = setTimeout(() => finish(new Error(`no reply within ${r.timeoutMs} ms`)), r.timeoutMs);
        send(s, requestBytes(r));
        buf = Buffer.alloc(0);
        // The guest's first bytes may share the read with the 101.
        if (chunk) {
          if (h.rest.length === 0) return;
          chunk = Buffer.from(h.rest);
        }
      }
      const out = replyStep(reader, chunk);
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
          onBytes(s, chunk);
        },
        drain(s) {
          if (unsent) send(s, unsent);
        },
        end(s) {
          onBytes(s, undefined);
        },
        close(s) {
          onBytes(s, undefined);
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
