// HTTP/1.1 toward the guest, written directly on the tunnel (a GuestWire: a Bun socket for plain-TCP nodes,
// bun-tunnel.ts; node:net/tls for TLS nodes) (docs/envd-relay.md "Streaming"): one request
// per connection (`Connection: close`), the request body sent as it arrives (Content-Length when the client gave
// one, else chunked), the response read through the framing parser (framing/, docs/envd-relay.md "Framing") and
// its body streamed out as a pull-based web stream: chunked framing decoded incrementally, Content-Length or
// close-delimited bodies passed through untouched.
// Replaces node:http on the hot path: it parsed and re-emitted every chunk through JS event machinery.
import type net from "node:net";
import { realClock, type Clock, type Timer } from "../clock/index.ts";
import { bodyDecoder, FramingError, isFramingError, ResponseHeadReader, type BodyDecoder } from "./framing/index.ts";
import type { GuestRequest } from "./guest.ts";
import { GUEST_BODY_QUEUE, HOP_BY_HOP, connectionOptions, drained, errorBody } from "./guest.ts";

/**
 * How long a guest that has started its response head may take to finish it (docs/envd-relay.md "Framing"): an
 * honest server writes its head at once, a slowloris one would hold the tunnel. The wait for the first byte is
 * the client's to end (its abort tears the tunnel down).
 */
export const HEAD_DEADLINE_MS = 10_000;
const QUEUE_BYTES = GUEST_BODY_QUEUE.highWaterMark ?? 0;
const NO_BYTES: Buffer = Buffer.alloc(0);

export interface Http1Options {
  headDeadlineMs?: number;
  clock?: Clock;
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

async function sendBody(w: GuestWire, body: ReadableStream<Uint8Array>, chunked: boolean, count: (n: number) => void, signal: AbortSignal, sent?: () => void): Promise<void> {
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
    sent?.();
  } finally {
    signal.removeEventListener("abort", stop);
  }
}

/** The guest leg over a node:net tunnel socket (TLS nodes). */
export function forwardHttp1Raw(sock: net.Socket, r: GuestRequest, o: Http1Options = {}): Promise<Response> {
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
  const { response, events } = startHttp1(wire, r, o);
  sock.on("data", events.data);
  sock.once("end", events.end);
  sock.once("error", events.error);
  sock.once("close", events.close);
  sock.resume();
  return response;
}

/** The guest's response headers the client may see: no hop-by-hop ones and none the guest's Connection names. */
function clientHeaders(lines: readonly [string, string][]): Headers {
  // One pass for the Connection values (usually none): no intermediate arrays on every response.
  let connection: string | undefined;
  for (const [k, v] of lines) if (k === "connection") connection = connection === undefined ? v : `${connection},${v}`;
  const named = connectionOptions(connection);
  const out = new Headers();
  for (const [k, v] of lines) if (!HOP_BY_HOP.has(k) && !named.has(k)) out.append(k, v);
  return out;
}

/**
 * One HTTP/1.1 exchange on a wire: writes the head, streams the request body, and resolves with the response once
 * its head arrives. The caller routes the wire's events to `events`. Every guest byte goes through the framing
 * parser: a violation before the head rejects (the proxy answers 502), after it errors the body stream (the client
 * sees a reset), and either way only this exchange's tunnel is torn down.
 */
export function startHttp1(sock: GuestWire, r: GuestRequest, o: Http1Options = {}): { response: Promise<Response>; events: WireEvents } {
  const clock = o.clock ?? realClock;
  const headDeadlineMs = o.headDeadlineMs ?? HEAD_DEADLINE_MS;
  const teardown = () => sock.destroy();
  r.signal.addEventListener("abort", teardown, { once: true });
  const hasLength = r.headers["content-length"] !== undefined;
  const chunked = r.body !== null && !hasLength;
  let head = `${r.method} ${r.path} HTTP/1.1\r\nhost: ${r.authority}\r\n`;
  for (const [k, v] of Object.entries(r.headers)) if (k !== "host" && k !== "transfer-encoding" && k !== "connection") head += `${k}: ${v}\r\n`;
  head += `connection: close\r\n${chunked ? "transfer-encoding: chunked\r\n" : ""}\r\n`;

  let events: WireEvents | undefined;
  const response = new Promise<Response>((resolve, reject) => {
    const headReader = new ResponseHeadReader(r.method);
    let headTimer: Timer | undefined;
    let interimSeen = 0;
    const onHeadDeadline = () => fail(new FramingError(`no complete response head within ${headDeadlineMs} ms`, "head"));
    let ctrl: ReadableStreamDefaultController<Uint8Array> | undefined;
    let decoder: BodyDecoder | undefined;
    let finished = false;
    // The guest's body is complete but the client has not read all of it: the stream closes (and r.bodyEnd hears
    // of it) when the queue has drained, so the listener's idle timeout is re-armed only once the client has it all.
    let draining = false;
    // True while the data event that resolved the response runs (a body error then must wait a turn: errorBody).
    let headTurn = false;
    // What one guest read yields is gathered into one queue entry (docs/envd-relay.md "Bounds"): a body of 1-byte
    // chunks would otherwise queue one object per chunk (each pinning its read buffer) in a queue that counts bytes.
    // The decoder hands over offsets (no view object per chunk); the first range is kept as offsets, later ones are
    // copied into one buffer.
    let read = NO_BYTES;
    let firstStart = -1;
    let firstEnd = 0;
    let gathered: Buffer | undefined;
    let gatheredLen = 0;
    let chunks = 0;
    // Set while the namespace's decode budget holds this body back (r.pace): only its timer resumes the guest.
    let paceTimer: Timer | undefined;
    const collect = (start: number, end: number) => {
      chunks++;
      if (end === start) return;
      if (firstStart < 0) {
        firstStart = start;
        firstEnd = end;
        return;
      }
      if (gathered === undefined) {
        gathered = Buffer.allocUnsafe(read.length); // the body bytes of one read never exceed the read
        gatheredLen = read.copy(gathered, 0, firstStart, firstEnd);
      }
      // A tiny chunk is cheaper to copy byte by byte than through a native call.
      if (end - start <= 8) for (let i = start; i < end; i++) gathered[gatheredLen++] = read[i]!;
      else gatheredLen += read.copy(gathered, gatheredLen, start, end);
    };
    const emit = () => {
      if (firstStart < 0) return;
      let out: Buffer;
      if (gathered) out = gathered.subarray(0, gatheredLen);
      // A lone slice much smaller than its read is copied, so what the queue counts is what it pins.
      else out = (firstEnd - firstStart) * 2 < read.length ? Buffer.from(read.subarray(firstStart, firstEnd)) : read.subarray(firstStart, firstEnd);
      firstStart = -1;
      gathered = undefined;
      gatheredLen = 0;
      r.onBytesOut(out.length);
      ctrl!.enqueue(new Uint8Array(out.buffer, out.byteOffset, out.byteLength));
      // relay bounds (limits.ts): report what waits for the client.
      r.queued?.(QUEUE_BYTES - (ctrl!.desiredSize ?? 0));
    };
    const closeBody = () => {
      draining = false;
      try {
        ctrl!.close();
      } catch {
        return; // cancelled
      }
      r.bodyEnd?.bodyEnded();
    };
    const finish = () => {
      if (finished) return;
      finished = true;
      headTimer?.cancel();
      paceTimer?.cancel();
      teardown();
      if ((ctrl!.desiredSize ?? 0) >= QUEUE_BYTES) closeBody();
      else draining = true;
    };
    const fail = (err: Error) => {
      if (finished) return;
      finished = true;
      headTimer?.cancel();
      paceTimer?.cancel();
      if (ctrl) {
        if (isFramingError(err)) r.onBodyFramingError?.(err);
        // Errored, not closed: the client must see a failed download, never a truncated success.
        errorBody(ctrl, err, headTurn);
      } else reject(err);
      teardown();
    };
    const body = (b: Buffer) => {
      read = b;
      chunks = 0;
      decoder!.feedRanges(b, collect);
      emit();
      read = NO_BYTES; // a paused stream pins no read buffer of its own
      if (decoder!.done) return finish();
      if (ctrl && (ctrl.desiredSize ?? 0) <= 0) sock.pause();
      const wait = chunks > 1 && r.pace ? r.pace(chunks) : 0;
      if (wait > 0 && paceTimer === undefined) {
        sock.pause();
        paceTimer = clock.after(wait, () => {
          paceTimer = undefined;
          if (!finished && (ctrl?.desiredSize ?? 0) > 0) sock.resume();
        });
      }
    };
    const onData = (c: Buffer) => {
      if (finished) return;
      try {
        if (decoder) return body(c);
        const got = headReader.feed(c);
        if (!got) {
          // The deadline runs from the head's first byte; a head that came whole in one read never needs a timer.
          headTimer ??= clock.after(headDeadlineMs, onHeadDeadline);
          // A complete interim head (100 Continue before a long upload) restarts the clock for the next head.
          if (headReader.interimHeads !== interimSeen) {
            interimSeen = headReader.interimHeads;
            headTimer.cancel();
            headTimer = headReader.started ? clock.after(headDeadlineMs, onHeadDeadline) : undefined;
          }
          return;
        }
        headTimer?.cancel();
        const { status, framing } = got.head;
        const headers = clientHeaders(got.head.headers);
        if (framing.kind === "none" || (framing.kind === "length" && framing.length === 0)) {
          finished = true;
          teardown();
          resolve(new Response(null, { status, headers }));
          return;
        }
        decoder = bodyDecoder(framing);
        const stream = new ReadableStream<Uint8Array>(
          {
            start(c) {
              ctrl = c;
            },
            pull() {
              if (finished) {
                // The tunnel is gone (its budget share released): only the close waits for the queue to drain.
                if (draining && (ctrl!.desiredSize ?? 0) >= QUEUE_BYTES) closeBody();
                return;
              }
              r.queued?.(QUEUE_BYTES - (ctrl!.desiredSize ?? 0)); // relay bounds (limits.ts)
              if (paceTimer === undefined) sock.resume();
            },
            cancel() {
              finished = true;
              paceTimer?.cancel();
              draining = false;
              teardown();
            },
          },
          // The decoder hands over one slice per guest chunk (often 64 KiB): a byte-counted queue, not a chunk count.
          GUEST_BODY_QUEUE,
        );
        resolve(new Response(stream, { status, headers }));
        if (got.rest.length) {
          headTurn = true;
          body(Buffer.from(got.rest));
        }
      } catch (err) {
        fail(err as Error);
      } finally {
        headTurn = false;
      }
    };
    /** The guest closed its side: complete only if the framing says the body is. */
    const onEnd = () => {
      if (finished) return;
      try {
        if (!decoder) return headReader.end();
        decoder.end();
        finish();
      } catch (err) {
        fail(err as Error);
      }
    };
    events = {
      data: onData,
      end: onEnd,
      error: (err) => fail(err),
      // Every exchange ends in a close: build the Error (a stack capture) only when it is news.
      close: () => void (finished || fail(new Error("tunnel closed"))),
    };
  });
  sock.write(head);
  if (r.body) sendBody(sock, r.body, chunked, r.onBytesIn, r.signal, r.onBodySent).catch(() => teardown());
  return { response, events: events! };
}
