// WebSocket upgrades to a guest port (docs/envd-relay.md "Protocols"). Bun's fetch handler never hands over the
// client's raw socket, so the relay terminates the client's WebSocket in Bun.serve and speaks a WebSocket client
// over the node's tunnel to the guest, moving each message across: text stays text, binary stays binary, pings
// are answered, a close on either side closes the other. Both directions are flow-controlled (docs/envd-relay.md
// "Bounds"): a client that cannot take more stops the relay reading the guest, a guest that cannot take more
// stops the relay reading the client, and a message that would be dropped or is over the cap is a close code.
import { randomBytes } from "node:crypto";
import type net from "node:net";
import type { ServerWebSocket } from "bun";
import { ResponseHeadReader, type HeadDone } from "./framing/index.ts";
import type { BufferShare } from "./limits.ts";
import { BAD_CONTROL, encodeFrame, FrameReader, OP, TOO_BIG, WS_MAX_MESSAGE_BYTES } from "./ws-frames.ts";

export { decodeFrames, encodeFrame, FrameReader, WS_MAX_MESSAGE_BYTES, type Frame } from "./ws-frames.ts";

export const WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
/**
 * The largest message Bun takes from the client (its maxPayloadLength; larger closes 1009). Bun holds a partial
 * message where no counter sees it, so this times --max-relays is in the worst case (docs/envd-relay.md "Bounds").
 */
export const WS_MAX_CLIENT_MESSAGE_BYTES = 1024 * 1024;
/** What may wait toward the guest on one WebSocket: past it the client is closed 1008 (it is paused long before). */
export const WS_MAX_TOWARD_GUEST_BYTES = 2 * WS_MAX_CLIENT_MESSAGE_BYTES;
/** A paused client socket reads nothing, so it would never see its client leave: it is pinged this often. */
export const WS_PAUSED_PING_MS = 2_000;

export function isWebSocketUpgrade(req: Request): boolean {
  const upgrade = (req.headers.get("upgrade") ?? "").toLowerCase();
  const connection = (req.headers.get("connection") ?? "").toLowerCase();
  return req.method === "GET" && upgrade === "websocket" && connection.split(",").some((t) => t.trim() === "upgrade");
}

/** State a relayed WebSocket carries between Bun's handlers. */
export interface WsRelayData {
  sock: net.Socket;
  /** Bytes the guest sent right after its 101, before Bun's open handler ran. */
  pending: Buffer;
  /** This connection's part of the relay's buffer budget. */
  share?: BufferShare;
  onClose(): void;
  pump?: WsPump;
}

/** The guest did not answer the upgrade in time, or the client left first: the tunnel is closed either way. */
export class HandshakeTimeout extends Error {
  override name = "HandshakeTimeout";
}

/**
 * The client half of the handshake toward the guest over `sock`: resolves with the guest's chosen subprotocol and
 * any bytes after its 101, or rejects with the guest's non-101 status, a HandshakeTimeout after `timeoutMs`, or
 * when `signal` aborts (the client left).
 */
export function guestHandshake(
  sock: net.Socket,
  path: string,
  headers: Record<string, string>,
  o: { timeoutMs: number; signal?: AbortSignal } = { timeoutMs: 30_000 },
): Promise<{ protocol: string | undefined; rest: Buffer }> {
  return new Promise((resolve, reject) => {
    const key = randomBytes(16).toString("base64");
    const done = () => {
      clearTimeout(timer);
      o.signal?.removeEventListener("abort", onAbort);
      sock.off("data", onData);
      sock.off("error", fail);
      sock.off("close", onClose);
    };
    const fail = (err: Error) => {
      done();
      reject(err);
    };
    const onAbort = () => fail(new HandshakeTimeout("the client left before the guest answered the WebSocket upgrade"));
    const onClose = () => fail(new Error("the tunnel closed before the guest answered the WebSocket upgrade"));
    const timer = setTimeout(() => fail(new HandshakeTimeout(`the guest did not answer the WebSocket upgrade within ${o.timeoutMs} ms`)), o.timeoutMs);
    // The guest's handshake head goes through the one framing parser like every other guest head: CRLF only, no
    // NUL or obs-fold, bounded size and line count, a status in 100..599 (interim heads skipped).
    const reader = new ResponseHeadReader("GET", { upgrade: true });
    const onData = (c: Buffer) => {
      let got: HeadDone | undefined;
      try {
        got = reader.feed(c);
      } catch (err) {
        return fail(err as Error);
      }
      if (!got) return;
      done();
      sock.pause();
      const { status, headers } = got.head;
      if (status !== 101) return reject(Object.assign(new Error(`guest answered ${status} to the WebSocket upgrade`), { status }));
      const proto = headers.find(([k]) => k === "sec-websocket-protocol");
      // A copy: the reader's buffer is not ours to keep.
      resolve({ protocol: proto ? proto[1] : undefined, rest: Buffer.from(got.rest) });
    };
    if (o.signal?.aborted) return onAbort();
    o.signal?.addEventListener("abort", onAbort, { once: true });
    sock.on("data", onData);
    sock.once("error", fail);
    sock.once("close", onClose);
    let head = `GET ${path} HTTP/1.1\r\n`;
    for (const [k, v] of Object.entries({ ...headers, upgrade: "websocket", connection: "Upgrade", "sec-websocket-key": key, "sec-websocket-version": "13" })) head += `${k}: ${v}\r\n`;
    sock.resume();
    sock.write(`${head}\r\n`);
  });
}

/** One relayed WebSocket's two pumps and the flags that hold each side back. */
export class WsPump {
  private readonly reader = new FrameReader(WS_MAX_MESSAGE_BYTES);
  private fragments: Buffer[] = [];
  private fragBytes = 0;
  private fragOp: number = OP.binary;
  /** Guest bytes read but not yet decoded: the client was backpressured mid-read. */
  private backlog: Buffer | undefined;
  /** The client's send buffer is full (send() answered -1): wait for drain before reading the guest. */
  private clientFull = false;
  /** The tunnel's write buffer is full: the client is paused until the socket drains. */
  private guestFull = false;
  /** Over the global buffer budget: both sides are paused until it has room. */
  private budgetHeld = false;
  private done = false;
  private pinger: ReturnType<typeof setInterval> | undefined;

  constructor(
    private readonly ws: ServerWebSocket<WsRelayData>,
    private readonly sock: net.Socket,
    private readonly share: BufferShare | undefined,
  ) {}

  start(pending: Buffer): void {
    this.sock.on("data", this.onGuestData);
    this.sock.once("close", () => this.close(1001, "guest went away"));
    this.sock.once("error", () => this.close(1011, "guest connection failed"));
    if (pending.length) this.run(pending);
    if (!this.backlog && !this.clientFull && !this.budgetHeld) this.sock.resume();
  }

  private readonly onGuestData = (c: Buffer) => {
    if (this.backlog) {
      // Bytes already in flight when the socket was paused: keep them behind the backlog, in order.
      this.backlog = Buffer.concat([this.backlog, c]);
      return;
    }
    this.run(c);
  };

  private run(c: Buffer): void {
    const at = this.reader.feed(c, 0, this.onFrame);
    if (this.done) return;
    if (at === TOO_BIG) return this.close(1009, "message too big");
    if (at === BAD_CONTROL) return this.close(1002, "control frame over 125 bytes or fragmented");
    if (at < c.length) {
      this.backlog = c.subarray(at);
      this.sock.pause();
    }
    this.account();
  }

  private readonly onFrame = (fin: boolean, op: number, payload: Buffer): boolean => {
    if (this.done) return false;
    if (op === OP.ping) {
      // At most 125 bytes (the reader refuses more); and none while the tunnel is backed up: RFC 6455 §5.5.3 lets an
      // endpoint answer only the latest ping, so a guest that pings without reading cannot grow the write buffer.
      if (this.sock.writableLength === 0) this.sock.write(encodeFrame(OP.pong, payload));
      return true;
    }
    if (op === OP.pong) return true;
    if (op === OP.close) {
      const code = payload.length >= 2 ? payload.readUInt16BE(0) : 1000;
      this.close(code === 1005 || code === 1006 ? 1000 : code, payload.subarray(2).toString("utf8"));
      return false;
    }
    if (op !== OP.cont) this.fragOp = op;
    this.fragBytes += payload.length;
    if (this.fragBytes > WS_MAX_MESSAGE_BYTES) {
      this.close(1009, "message too big");
      return false;
    }
    if (!fin) {
      this.fragments.push(payload);
      return true;
    }
    // Fragments are joined once, at the end of the message.
    const msg = this.fragments.length ? Buffer.concat([...this.fragments, payload]) : payload;
    this.fragments = [];
    this.fragBytes = 0;
    const sent = this.fragOp === OP.text ? this.ws.send(msg.toString("utf8")) : this.ws.send(msg);
    if (sent === 0) {
      // Bun dropped it (over its backpressure limit): say so rather than lose it silently.
      this.close(1008, "the client is not reading: message dropped");
      return false;
    }
    if (sent === -1) {
      // Queued for a slow client: read no more of the guest until drain.
      this.clientFull = true;
      return false;
    }
    return true;
  };

  /** Client -> guest: one masked frame per message; a full tunnel pauses the client. */
  fromClient(message: string | Buffer): void {
    if (this.done) return;
    const payload = typeof message === "string" ? Buffer.from(message, "utf8") : message;
    if (!this.sock.write(encodeFrame(typeof message === "string" ? OP.text : OP.binary, payload)) && !this.guestFull) {
      this.guestFull = true;
      this.pauseClient();
      this.sock.once("drain", this.onGuestDrain);
    }
    if (this.sock.writableLength > WS_MAX_TOWARD_GUEST_BYTES) return this.close(1008, "the guest is not reading");
    this.account();
  }

  private readonly onGuestDrain = () => {
    this.guestFull = false;
    this.account();
    this.resumeFree();
  };

  /** Bun's drain: the client took what was queued. */
  clientDrained(): void {
    this.clientFull = false;
    this.account();
    this.resumeFree();
  }

  private resumeFree(): void {
    if (this.done || this.budgetHeld) return;
    if (!this.guestFull && this.ws.isPaused) this.resumeClient();
    if (this.clientFull) return;
    const b = this.backlog;
    if (b) {
      this.backlog = undefined;
      this.run(b);
      if (this.backlog || this.clientFull || this.budgetHeld || this.done) return;
    }
    this.sock.resume();
  }

  /** What this connection holds, into the global budget; over it, both sides wait for room. */
  private account(): void {
    if (!this.share || this.done) return;
    const held = this.reader.partialBytes + this.fragBytes + (this.backlog?.length ?? 0) + this.ws.getBufferedAmount() + this.sock.writableLength;
    const mid = this.reader.midFrame;
    if (this.share.set(held)) {
      if (!mid) this.share.releaseOverdraft();
      return;
    }
    if (!mid) this.share.releaseOverdraft();
    else if (this.share.takeOverdraft()) return;
    if (this.budgetHeld) return;
    this.budgetHeld = true;
    this.sock.pause();
    this.pauseClient();
    this.share.whenUnder(() => {
      this.budgetHeld = false;
      this.resumeFree();
    });
  }

  private pauseClient(): void {
    this.ws.pause();
    this.pinger ??= setInterval(() => this.ws.ping(), WS_PAUSED_PING_MS);
    this.pinger.unref?.();
  }

  private resumeClient(): void {
    clearInterval(this.pinger);
    this.pinger = undefined;
    this.ws.resume();
  }

  close(code: number, reason: string): void {
    if (this.done) return;
    this.done = true;
    clearInterval(this.pinger);
    this.backlog = undefined;
    this.fragments = [];
    this.share?.release();
    this.ws.close(code, reason);
  }

  /** The client side closed (or was closed): tell the guest, then drop the tunnel. */
  closed(code: number, reason: string): void {
    this.done = true;
    clearInterval(this.pinger);
    this.backlog = undefined;
    this.fragments = [];
    this.share?.release();
    const { sock } = this;
    if (!sock.destroyed) {
      const body = Buffer.alloc(2 + Buffer.byteLength(reason));
      body.writeUInt16BE(code >= 1000 && code < 5000 && code !== 1005 && code !== 1006 ? code : 1000, 0);
      body.write(reason, 2);
      sock.end(encodeFrame(OP.close, body));
      setTimeout(() => sock.destroy(), 1_000).unref?.();
    }
  }
}

/** Bun.serve `websocket` options: limits and the handlers that pump messages between the client and the guest. */
export const wsRelayHandlers = {
  maxPayloadLength: WS_MAX_CLIENT_MESSAGE_BYTES,
  backpressureLimit: WS_MAX_MESSAGE_BYTES,
  closeOnBackpressureLimit: false,
  open(ws: ServerWebSocket<WsRelayData>) {
    const pump = new WsPump(ws, ws.data.sock, ws.data.share);
    ws.data.pump = pump;
    pump.start(ws.data.pending);
    ws.data.pending = Buffer.alloc(0);
  },
  message(ws: ServerWebSocket<WsRelayData>, message: string | Buffer) {
    ws.data.pump?.fromClient(message);
  },
  drain(ws: ServerWebSocket<WsRelayData>) {
    ws.data.pump?.clientDrained();
  },
  close(ws: ServerWebSocket<WsRelayData>, code: number, reason: string) {
    if (ws.data.pump) ws.data.pump.closed(code, reason);
    else ws.data.sock.destroy();
    ws.data.onClose();
  },
};
