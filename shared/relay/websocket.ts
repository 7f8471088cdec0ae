// WebSocket upgrades to a guest port (docs/envd-relay.md "Protocols"). Bun's fetch handler never hands over the
// client's raw socket, so the relay terminates the client's WebSocket in Bun.serve and speaks a WebSocket client
// over the node's tunnel to the guest, moving each message across: text stays text, binary stays binary, pings
// are answered, a close on either side closes the other. Frames toward the guest are masked (RFC 6455 §5.3).
import { randomBytes } from "node:crypto";
import type net from "node:net";
import type { ServerWebSocket } from "bun";

export const WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
/** A message larger than this from the guest closes the connection (1009) rather than growing without bound. */
export const WS_MAX_MESSAGE_BYTES = 64 * 1024 * 1024;

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
  onClose(): void;
}

const OP = { cont: 0, text: 1, binary: 2, close: 8, ping: 9, pong: 10 } as const;

/** One masked client frame. */
export function encodeFrame(op: number, payload: Uint8Array): Buffer {
  const len = payload.byteLength;
  const head = len < 126 ? 2 : len < 65536 ? 4 : 10;
  const out = Buffer.allocUnsafe(head + 4 + len);
  out[0] = 0x80 | op;
  if (len < 126) out[1] = 0x80 | len;
  else if (len < 65536) {
    out[1] = 0x80 | 126;
    out.writeUInt16BE(len, 2);
  } else {
    out[1] = 0x80 | 127;
    out.writeBigUInt64BE(BigInt(len), 2);
  }
  const mask = randomBytes(4);
  mask.copy(out, head);
  for (let i = 0; i < len; i++) out[head + 4 + i] = payload[i]! ^ mask[i & 3]!;
  return out;
}

export interface Frame {
  fin: boolean;
  op: number;
  payload: Buffer;
}

/** Frames complete in `buf`, and the bytes left over (a partial frame). */
export function decodeFrames(buf: Buffer): { frames: Frame[]; rest: Buffer; tooBig: boolean } {
  const frames: Frame[] = [];
  let off = 0;
  for (;;) {
    if (buf.length - off < 2) break;
    const b0 = buf[off]!;
    const b1 = buf[off + 1]!;
    let len = b1 & 0x7f;
    let p = off + 2;
    if (len === 126) {
      if (buf.length - off < 4) break;
      len = buf.readUInt16BE(off + 2);
      p = off + 4;
    } else if (len === 127) {
      if (buf.length - off < 10) break;
      const big = buf.readBigUInt64BE(off + 2);
      if (big > BigInt(WS_MAX_MESSAGE_BYTES)) return { frames, rest: Buffer.alloc(0), tooBig: true };
      len = Number(big);
      p = off + 10;
    }
    const masked = (b1 & 0x80) !== 0;
    const maskAt = p;
    if (masked) p += 4;
    if (buf.length < p + len) break;
    let payload = buf.subarray(p, p + len);
    if (masked) {
      payload = Buffer.from(payload);
      for (let i = 0; i < len; i++) payload[i]! ^= buf[maskAt + (i & 3)]!;
    }
    frames.push({ fin: (b0 & 0x80) !== 0, op: b0 & 0x0f, payload });
    off = p + len;
  }
  return { frames, rest: buf.subarray(off), tooBig: false };
}

/**
 * The client half of the handshake toward the guest over `sock`: resolves with the guest's chosen subprotocol and
 * any bytes after its 101, or rejects with the guest's non-101 status.
 */
export function guestHandshake(sock: net.Socket, path: string, headers: Record<string, string>): Promise<{ protocol: string | undefined; rest: Buffer }> {
  return new Promise((resolve, reject) => {
    const key = randomBytes(16).toString("base64");
    let buf: Buffer = Buffer.alloc(0);
    const onData = (c: Buffer) => {
      buf = buf.length ? Buffer.concat([buf, c]) : c;
      const end = buf.indexOf("\r\n\r\n");
      if (end < 0) {
        if (buf.length > 16 * 1024) fail(new Error("guest handshake reply too large"));
        return;
      }
      sock.off("data", onData);
      sock.off("error", fail);
      sock.pause();
      const lines = buf.subarray(0, end).toString("latin1").split("\r\n");
      const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(lines[0] ?? "")?.[1] ?? NaN);
      if (status !== 101) return reject(Object.assign(new Error(`guest answered ${status} to the WebSocket upgrade`), { status }));
      const proto = lines.find((l) => /^sec-websocket-protocol:/i.test(l));
      resolve({ protocol: proto ? proto.slice(proto.indexOf(":") + 1).trim() : undefined, rest: buf.subarray(end + 4) });
    };
    const fail = (err: Error) => {
      sock.off("data", onData);
      reject(err);
    };
    sock.on("data", onData);
    sock.once("error", fail);
    let head = `GET ${path} HTTP/1.1\r\n`;
    for (const [k, v] of Object.entries({ ...headers, upgrade: "websocket", connection: "Upgrade", "sec-websocket-key": key, "sec-websocket-version": "13" })) head += `${k}: ${v}\r\n`;
    sock.resume();
    sock.write(`${head}\r\n`);
  });
}

/** Bun.serve `websocket` handlers that pump messages between the client and the guest socket. */
export const wsRelayHandlers = {
  open(ws: ServerWebSocket<WsRelayData>) {
    const { sock } = ws.data;
    let buf: Buffer = ws.data.pending;
    let fragments: Buffer[] = [];
    let fragOp = OP.binary as number;
    let fragSize = 0;
    const pump = () => {
      const { frames, rest, tooBig } = decodeFrames(buf);
      buf = Buffer.from(rest);
      if (tooBig) return ws.close(1009, "message too big");
      for (const f of frames) {
        if (f.op === OP.ping) sock.write(encodeFrame(OP.pong, f.payload));
        else if (f.op === OP.pong) continue;
        else if (f.op === OP.close) {
          const code = f.payload.length >= 2 ? f.payload.readUInt16BE(0) : 1000;
          ws.close(code === 1005 || code === 1006 ? 1000 : code, f.payload.subarray(2).toString("utf8"));
          return;
        } else {
          if (f.op !== OP.cont) fragOp = f.op;
          fragments.push(f.payload);
          fragSize += f.payload.length;
          if (fragSize > WS_MAX_MESSAGE_BYTES) return ws.close(1009, "message too big");
          if (!f.fin) continue;
          const msg = fragments.length === 1 ? fragments[0]! : Buffer.concat(fragments);
          fragments = [];
          fragSize = 0;
          // -1: Bun is buffering for a slow client; stop reading the guest until drain().
          if ((fragOp === OP.text ? ws.send(msg.toString("utf8")) : ws.send(msg)) === -1) sock.pause();
        }
      }
    };
    sock.on("data", (c: Buffer) => {
      buf = buf.length ? Buffer.concat([buf, c]) : c;
      pump();
    });
    sock.once("close", () => ws.close(1001, "guest went away"));
    sock.once("error", () => ws.close(1011, "guest connection failed"));
    if (buf.length) pump();
    sock.resume();
  },
  message(ws: ServerWebSocket<WsRelayData>, message: string | Buffer) {
    const payload = typeof message === "string" ? Buffer.from(message, "utf8") : message;
    ws.data.sock.write(encodeFrame(typeof message === "string" ? OP.text : OP.binary, payload));
  },
  drain(ws: ServerWebSocket<WsRelayData>) {
    ws.data.sock.resume();
  },
  close(ws: ServerWebSocket<WsRelayData>, code: number, reason: string) {
    const { sock } = ws.data;
    if (!sock.destroyed) {
      const body = Buffer.alloc(2 + Buffer.byteLength(reason));
      body.writeUInt16BE(code >= 1000 && code < 5000 && code !== 1005 && code !== 1006 ? code : 1000, 0);
      body.write(reason, 2);
      sock.end(encodeFrame(OP.close, body));
      setTimeout(() => sock.destroy(), 1_000).unref?.();
    }
    ws.data.onClose();
  },
};
