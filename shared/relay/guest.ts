// The guest leg of the relay (docs/envd-relay.md "Streaming"): one request over an open tunnel socket, HTTP/1.1 by
// default (h1.ts) or cleartext HTTP/2 by prior knowledge (--guest-http2, here). Bodies stream both ways with backpressure: the
// client's body is pulled only as fast as the tunnel drains, the guest's body only as fast as the client reads.
// At most GUEST_BODY_QUEUE's bytes wait for the client. Closing either end tears the tunnel down.
import http2 from "node:http2";
import type { IncomingHttpHeaders } from "node:http";
import type net from "node:net";
import type { Readable, Writable } from "node:stream";

/**
 * Hop-by-hop headers (RFC 9110 §7.6.1), HTTP/2-forbidden ones, and the client's credentials for this proxy
 * (Proxy-Authorization is meant for the hop that receives it): never forwarded either way.
 */
export const HOP_BY_HOP = new Set(["connection", "keep-alive", "proxy-connection", "proxy-authorization", "transfer-encoding", "te", "trailer", "upgrade", "http2-settings", "host"]);

const NO_OPTIONS: ReadonlySet<string> = new Set();
const KEEP_ALIVE: ReadonlySet<string> = new Set(["keep-alive"]);
const CLOSE: ReadonlySet<string> = new Set(["close"]);

/** The header names a Connection value lists (RFC 9110 §7.6.1): hop-by-hop for that one message. */
export function connectionOptions(value: string | null | undefined): ReadonlySet<string> {
  // Nearly every message sends none, `keep-alive` or `close`: those build no set (this runs twice per relayed request).
  if (!value) return NO_OPTIONS;
  if (value === "keep-alive" || value === "Keep-Alive") return KEEP_ALIVE;
  if (value === "close" || value === "Close") return CLOSE;
  const out = new Set<string>();
  for (const t of (value ?? "").split(",")) {
    const name = t.trim().toLowerCase();
    if (name !== "") out.add(name);
  }
  return out;
}

/**
 * The client's request headers the guest may see: no hop-by-hop ones, none the client's Connection header names,
 * no pseudo-headers, and not the e2b API key (the guest authenticates with X-Access-Token, never the tenant's key).
 */
export function guestRequestHeaders(h: Headers): Record<string, string> {
  const named = connectionOptions(h.get("connection"));
  const out: Record<string, string> = {};
  h.forEach((v, k) => {
    if (HOP_BY_HOP.has(k) || named.has(k) || k === "x-api-key" || k.startsWith(":")) return;
    out[k] = v;
  });
  return out;
}

export interface GuestRequest {
  method: string;
  /** Path and query, untouched. */
  path: string;
  /** The authority the guest sees (`{port}-{id}.{domain}`). */
  authority: string;
  /** Already filtered: no hop-by-hop, no host. */
  headers: Record<string, string>;
  body: ReadableStream<Uint8Array> | null;
  onBytesIn(n: number): void;
  onBytesOut(n: number): void;
  /**
   * Bytes of the guest's body now waiting for the client, after each enqueue and each pull (the relay's budget,
   * limits.ts). False: hold the guest back until the client reads again.
   */
  queued?(bytes: number): boolean;
  /** False while the relay's budget holds this stream back: a resume waits for the next pull (limits.ts). */
  mayRead?(): boolean;
  /** Aborts when the client goes away. */
  signal: AbortSignal;
  /**
   * The guest's body broke its framing after the response head was handed on (the client's download then fails):
   * called once per exchange, for the relay's metric and warn line.
   */
  onBodyFramingError?(err: Error): void;
  /** Told when the client has been handed the body's last byte (never for a failed or cancelled body). */
  bodyEnd?: BodyEndListener;
  /** Called once the request body's last byte went to the guest (the relay's body-rate check ends then). */
  onBodySent?(): void;
  /**
   * The guest's body came in `chunks` chunks in this read: how long (ms) to stop reading it (0 = read on). The
   * relay's per-namespace decode budget (limits.ts ChunkPacer): 1-byte chunks cost the parser per chunk, and one
   * tenant's guest must not take the proxy's thread from the others.
   */
  pace?(chunks: number): number;
}

/** Who wants to know that a relayed body was read to its end (the listener's idle timeout, idle.ts). */
export interface BodyEndListener {
  bodyEnded(): void;
}

/**
 * Error a guest body's stream without Bun printing it: Bun 1.4.5 writes a raw stack to stderr for a response stream
 * that errors before Bun has started reading it (measured: an error raised in the same turn the response was
 * handed on is printed, one raised a macrotask later is not, whether through controller.error or a rejected pull).
 * `sameTurn`: the error came in the turn that resolved the response, so it waits one macrotask.
 */
export function errorBody(ctrl: ReadableStreamDefaultController<Uint8Array>, err: Error, sameTurn: boolean): void {
  const error = () => {
    try {
      ctrl.error(err);
    } catch {
      // cancelled
    }
  };
  if (sameTurn) setImmediate(error);
  else error();
}

/**
 * How much of the guest's body may wait for the client before the guest is held back (docs/envd-relay.md "Bounds"):
 * a stalled download costs about twice this in RSS (Bun's chunk objects and its response sink come on top), so 1 MiB
 * made 128 stalled relays ~2 MiB each. The kernel's socket buffers hold several MiB more per stream, outside RSS.
 */
const GUEST_BODY_BUFFER = 256 * 1024;
/** The h2 stream's receive window: at the 64 KiB default the guest waits a round trip after every four frames. */
const GUEST_H2_WINDOW = 1024 * 1024;

/**
 * The guest body's queue, counted in bytes: guest chunks are 16-64 KiB, so a count of a few chunks paused the tunnel
 * after about every socket read, and each pause stalls the node's splice too. Shared by both guest legs.
 */
export const GUEST_BODY_QUEUE: QueuingStrategy<Uint8Array> = { highWaterMark: GUEST_BODY_BUFFER, size: (c) => c?.byteLength ?? 0 };

/** Resolves when the writable drains or closes (whichever first), leaving no listener behind. */
export function drained(sink: Writable): Promise<void> {
  return new Promise<void>((resolve) => {
    const done = () => {
      sink.off("drain", done);
      sink.off("close", done);
      resolve();
    };
    sink.on("drain", done);
    sink.on("close", done);
  });
}

/** Pump a web stream into a node writable, honouring backpressure. Ends the writable when the stream ends. */
async function pump(body: ReadableStream<Uint8Array>, sink: Writable, count: (n: number) => void, signal: AbortSignal, sent?: () => void): Promise<void> {
  const reader = body.getReader();
  const stop = () => void reader.cancel().catch(() => undefined);
  signal.addEventListener("abort", stop, { once: true });
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      count(value.byteLength);
      if (!sink.write(value)) await drained(sink);
      if (sink.destroyed) return;
    }
    sink.end();
    sent?.();
  } finally {
    signal.removeEventListener("abort", stop);
  }
}

/** A node readable as a web stream that reads only when the consumer pulls; cancel destroys `onCancel`. */
function webStream(src: Readable, r: GuestRequest, onCancel: () => void): ReadableStream<Uint8Array> {
  let ctrl: ReadableStreamDefaultController<Uint8Array>;
  // The guest's body is complete: the stream closes (and r.bodyEnd hears of it) once the client has read the queue.
  let ended = false;
  let draining = false;
  const closeBody = () => {
    draining = false;
    try {
      ctrl.close();
    } catch {
      return; // already cancelled
    }
    r.bodyEnd?.bodyEnded();
  };
  return new ReadableStream<Uint8Array>(
    {
      start(c) {
        ctrl = c;
        src.on("data", (chunk: Buffer) => {
          r.onBytesOut(chunk.length);
          ctrl.enqueue(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength));
          const room = r.queued?.(GUEST_BODY_BUFFER - (ctrl.desiredSize ?? 0)) !== false;
          if (!room || (ctrl.desiredSize ?? 0) <= 0) src.pause();
        });
        src.once("end", () => {
          ended = true;
          onCancel();
          if ((ctrl.desiredSize ?? 0) >= GUEST_BODY_BUFFER) closeBody();
          else draining = true;
        });
        src.once("error", (err) => {
          ended = true;
          // node:http2 may emit it in the turn that handed the response on: always a turn later (errorBody).
          errorBody(ctrl, err, true);
          onCancel();
        });
        src.pause();
      },
      pull() {
        if (ended) {
          if (draining && (ctrl.desiredSize ?? 0) >= GUEST_BODY_BUFFER) closeBody();
          return;
        }
        // Over the relay's budget a stream still holding much stays paused; the next pull asks again.
        if (r.queued?.(GUEST_BODY_BUFFER - (ctrl.desiredSize ?? 0)) !== false) src.resume();
      },
      cancel() {
        ended = true;
        draining = false;
        src.destroy();
        onCancel();
      },
    },
    GUEST_BODY_QUEUE,
  );
}

function responseHeaders(h: IncomingHttpHeaders | http2.IncomingHttpHeaders): Headers {
  const out = new Headers();
  for (const [k, v] of Object.entries(h)) {
    if (v === undefined || k.startsWith(":") || HOP_BY_HOP.has(k)) continue;
    if (Array.isArray(v)) for (const x of v) out.append(k, x);
    else out.set(k, String(v));
  }
  return out;
}

const noBody = (method: string, status: number) => method === "HEAD" || status === 204 || status === 304 || (status >= 100 && status < 200);

export async function forwardHttp2(sock: net.Socket, r: GuestRequest): Promise<Response> {
  sock.resume();
  // The guest still stops once the window (GUEST_H2_WINDOW) is unacknowledged.
  const session = http2.connect(`http://${r.authority}`, { createConnection: () => sock, settings: { initialWindowSize: GUEST_H2_WINDOW } });
  const teardown = () => {
    session.destroy();
    sock.destroy();
  };
  r.signal.addEventListener("abort", teardown, { once: true });
  session.once("error", teardown);
  const headers: http2.OutgoingHttpHeaders = { ...r.headers, ":method": r.method, ":path": r.path, ":authority": r.authority, ":scheme": "http" };
  const stream = session.request(headers, { endStream: r.body === null });
  const response = new Promise<Response>((resolve, reject) => {
    stream.once("error", reject);
    stream.once("response", (h) => {
      const status = Number(h[":status"] ?? NaN);
      // A status Response cannot carry (99, 600): this exchange fails (502), not the event handler.
      if (!Number.isInteger(status) || status < 200 || status > 599) {
        teardown();
        reject(new Error(`guest answered status ${String(h[":status"])}`));
        return;
      }
      const out = responseHeaders(h);
      if (noBody(r.method, status)) {
        stream.resume();
        stream.once("end", teardown);
        resolve(new Response(null, { status, headers: out }));
        return;
      }
      resolve(new Response(webStream(stream, r, teardown), { status, headers: out }));
    });
  });
  if (r.body) pump(r.body, stream, r.onBytesIn, r.signal, r.onBodySent).catch(() => teardown());
  return response;
}
