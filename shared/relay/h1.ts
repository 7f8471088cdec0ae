// HTTP/1.1 toward the guest, written directly on the tunnel (a GuestWire: a Bun socket for plain-TCP nodes,
// bun-tunnel.ts; node:net/tls for TLS nodes) (docs/envd-relay.md "Streaming"): one request
// per connection (`Connection: close`), the request body sent as it arrives (Content-Length when the client gave
// one, else chunked), the response head parsed here and its body streamed out as a pull-based web stream that
// decodes chunked framing incrementally and passes Content-Length or close-delimited bodies through untouched.
// Replaces node:http on the hot path: it parsed and re-emitted every chunk through JS event machinery.
import type net from "node:net";
import type { GuestRequest } from "./guest.ts";
import { GUEST_BODY_QUEUE, HOP_BY_HOP, drained } from "./guest.ts";

const MAX_HEAD_BYTES = 64 * 1024;
const QUEUE_BYTES = GUEST_BODY_QUEUE.highWaterMark ?? 0;

type Framing = { kind: "none" } | { kind: "length"; left: number } | { kind: "chunked" } | { kind: "close" };

/** Incremental chunked-transfer decoder: feed bytes, get body slices; `done` once the last chunk and trailers end. */
export class ChunkedDecoder {
  private state: "size" | "data" | "data-crlf" | "trailer" = "size";
  private left = 0;
  private line: Buffer = Buffer.alloc(0);
  done = false;

  feed(b: Buffer, out: (slice: Buffer) => void): void {
    let i = 0;
    while (i < b.length && !this.done) {
      if (this.state === "data") {
        const n = Math.min(this.left, b.length - i);
        out(b.subarray(i, i + n));
        i += n;
        this.left -= n;
        if (this.left === 0) this.state = "data-crlf";
        continue;
      }
      // Line-oriented states: read up to LF.
      const lf = b.indexOf(0x0a, i);
      if (lf < 0) {
        this.line = Buffer.concat([this.line, b.subarray(i)]);
        if (this.line.length > 4096) throw new Error("chunk line too long");
        return;
      }
      const line = Buffer.concat([this.line, b.subarray(i, lf)]).toString("latin1").replace(/\r$/, "");
      this.line = Buffer.alloc(0);
      i = lf + 1;
      if (this.state === "data-crlf") {
        this.state = "size";
      } else if (this.state === "size") {
        const size = parseInt(line.split(";")[0]!.trim(), 16);
        if (Number.isNaN(size)) throw new Error("bad chunk size");
        if (size === 0) this.state = "trailer";
        else {
          this.left = size;
          this.state = "data";
        }
      } else if (line === "") this.done = true; // end of trailers
    }
  }
}

/**
 * The byte pipe the guest leg runs on: a node:net tunnel socket (TLS nodes, openTunnel) or a Bun socket
 * (plain-TCP nodes, bun-tunnel.ts). `write` returning false means "wait for drained()" (the bytes are kept).
 */
export interface GuestWire {
  write(data: Buffer | string): boolean;
  drained(): Promise<void>;
  pause(): void;
  resume(): void;
  destroy(): void;
  readonly destroyed: boolean;
}

/** What the transport reports to the guest leg. */
export interface WireEvents {
  data(chunk: Buffer): void;
  end(): void;
  error(err: Error): void;
  close(): void;
}

/** Write, and when the wire's buffer is full wait for it to drain (or close). */
function writeAll(w: GuestWire, data: Buffer | string): Promise<void> {
  return w.write(data) ? Promise.resolve() : w.drained();
}

async function sendBody(w: GuestWire, body: ReadableStream<Uint8Array>, chunked: boolean, count: (n: number) => void, signal: AbortSignal): Promise<void> {
  const reader = body.getReader();
  const stop = () => void reader.cancel().catch(() => undefined);
  signal.addEventListener("abort", stop, { once: true });
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (value.byteLength === 0) continue;
      count(value.byteLength);
      const buf = Buffer.from(value.buffer, value.byteOffset, value.byteLength);
      await writeAll(w, chunked ? Buffer.concat([Buffer.from(`${value.byteLength.toString(16)}\r\n`), buf, Buffer.from("\r\n")]) : buf);
      if (w.destroyed) return;
    }
    if (chunked) await writeAll(w, "0\r\n\r\n");
  } finally {
    signal.removeEventListener("abort", stop);
  }
}

/** The guest leg over a node:net tunnel socket (TLS nodes). */
export function forwardHttp1Raw(sock: net.Socket, r: GuestRequest): Promise<Response> {
  const wire: GuestWire = {
    write: (d) => sock.write(d),
    drained: () => drained(sock),
    pause: () => void sock.pause(),
    resume: () => void (r.mayRead?.() !== false && sock.resume()), // relay bounds (limits.ts)
    destroy: () => void sock.destroy(),
    get destroyed() {
      return sock.destroyed;
    },
  };
  const { response, events } = startHttp1(wire, r);
  sock.on("data", events.data);
  sock.once("end", events.end);
  sock.once("error", events.error);
  sock.once("close", events.close);
  sock.resume();
  return response;
}

/**
 * One HTTP/1.1 exchange on a wire: writes the head, streams the request body, and resolves with the response once
 * its head arrives. The caller routes the wire's events to `events`.
 */
export function startHttp1(sock: GuestWire, r: GuestRequest): { response: Promise<Response>; events: WireEvents } {
  const teardown = () => sock.destroy();
  r.signal.addEventListener("abort", teardown, { once: true });
  const hasLength = r.headers["content-length"] !== undefined;
  const chunked = r.body !== null && !hasLength;
  let head = `${r.method} ${r.path} HTTP/1.1\r\nhost: ${r.authority}\r\n`;
  for (const [k, v] of Object.entries(r.headers)) if (k !== "host" && k !== "transfer-encoding" && k !== "connection") head += `${k}: ${v}\r\n`;
  head += `connection: close\r\n${chunked ? "transfer-encoding: chunked\r\n" : ""}\r\n`;

  let events: WireEvents | undefined;
  const response = new Promise<Response>((resolve, reject) => {
    let buf: Buffer = Buffer.alloc(0);
    let ctrl: ReadableStreamDefaultController<Uint8Array> | undefined;
    let framing: Framing | undefined;
    let decoder: ChunkedDecoder | undefined;
    let finished = false;
    const emit = (slice: Buffer) => {
      if (slice.length === 0) return;
      r.onBytesOut(slice.length);
      ctrl!.enqueue(new Uint8Array(slice.buffer, slice.byteOffset, slice.byteLength));
      // relay bounds (limits.ts): report what waits for the client.
      r.queued?.(QUEUE_BYTES - (ctrl!.desiredSize ?? 0));
    };
    const finish = () => {
      if (finished) return;
      finished = true;
      try {
        ctrl?.close();
      } catch {
        // cancelled
      }
      teardown();
    };
    const fail = (err: Error) => {
      if (finished) return;
      finished = true;
      if (ctrl) {
        try {
          ctrl.error(err);
        } catch {
          // cancelled
        }
      } else reject(err);
      teardown();
    };
    const body = (b: Buffer) => {
      const f = framing!;
      if (f.kind === "length") {
        const n = Math.min(f.left, b.length);
        emit(b.subarray(0, n));
        f.left -= n;
        if (f.left === 0) finish();
      } else if (f.kind === "chunked") {
        decoder!.feed(b, emit);
        if (decoder!.done) finish();
      } else if (f.kind === "close") emit(b);
      if (!finished && ctrl && (ctrl.desiredSize ?? 0) <= 0) sock.pause();
    };
    const onData = (c: Buffer) => {
      try {
        if (framing) return body(c);
        buf = buf.length ? Buffer.concat([buf, c]) : c;
        for (;;) {
          const end = buf.indexOf("\r\n\r\n");
          if (end < 0) {
            if (buf.length > MAX_HEAD_BYTES) fail(new Error("guest response head too large"));
            return;
          }
          const lines = buf.subarray(0, end).toString("latin1").split("\r\n");
          const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(lines[0] ?? "")?.[1] ?? NaN);
          if (!Number.isInteger(status)) return fail(new Error("guest answered something that is not HTTP/1.x"));
          const rest = buf.subarray(end + 4);
          if (status >= 100 && status < 200) {
            // Interim (100 Continue, 103): skip it and parse the final head.
            buf = rest;
            continue;
          }
          const headers = new Headers();
          let length: number | undefined;
          let isChunked = false;
          for (const line of lines.slice(1)) {
            const colon = line.indexOf(":");
            if (colon <= 0) continue;
            const k = line.slice(0, colon).trim().toLowerCase();
            const v = line.slice(colon + 1).trim();
            if (k === "content-length") length = Number(v);
            if (k === "transfer-encoding" && /chunked/i.test(v)) isChunked = true;
            if (HOP_BY_HOP.has(k)) continue;
            headers.append(k, v);
          }
          const noBody = r.method === "HEAD" || status === 204 || status === 304;
          framing = noBody ? { kind: "none" } : isChunked ? { kind: "chunked" } : length !== undefined ? { kind: "length", left: length } : { kind: "close" };
          if (framing.kind === "none" || (framing.kind === "length" && framing.left === 0)) {
            finished = true;
            teardown();
            resolve(new Response(null, { status, headers }));
            return;
          }
          if (framing.kind === "chunked") decoder = new ChunkedDecoder();
          const stream = new ReadableStream<Uint8Array>(
            {
              start(c) {
                ctrl = c;
              },
              pull() {
                r.queued?.(QUEUE_BYTES - (ctrl!.desiredSize ?? 0)); // relay bounds (limits.ts)
                sock.resume();
              },
              cancel() {
                finished = true;
                teardown();
              },
            },
            // The decoder hands over one slice per guest chunk (often 64 KiB): a byte-counted queue, not a chunk count.
            GUEST_BODY_QUEUE,
          );
          resolve(new Response(stream, { status, headers }));
          if (rest.length) body(Buffer.from(rest));
          return;
        }
      } catch (err) {
        fail(err as Error);
      }
    };
    events = {
      data: onData,
      end: () => {
        if (framing?.kind === "close") finish();
        else fail(new Error("guest closed the connection mid-response"));
      },
      error: (err) => fail(err),
      // Every exchange ends in a close: build the Error (a stack capture) only when it is news.
      close: () => void (finished || fail(new Error("tunnel closed"))),
    };
  });
  sock.write(head);
  if (r.body) sendBody(sock, r.body, chunked, r.onBytesIn, r.signal).catch(() => teardown());
  return { response, events: events! };
}
