// The hostile guest: a raw TCP server attached as a sandbox's port (cluster.nodes[i].attachGuest) that answers
// each request with the nasty thing its path names. Raw sockets, not Bun.serve, because most of these replies are
// not valid HTTP, and because "never reads" must really stop reading (socket.pause, so TCP pushes back).
// It counts its open connections: after an attack they must all close, or the proxy (or node) leaked a tunnel.
import { createHash } from "node:crypto";
import net from "node:net";

const WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/** Every behaviour, by the request path that selects it (`/neg-chunk`, `/ws/never-read`, ...). */
export const HTTP_CASES = [
  "neg-chunk", // 1\r\nZ\r\n-6\r\nQ: the chunk-size line of issue 17 case 1
  "huge-chunk", // a chunk size of 2^64-1, then a few bytes and silence
  "bad-chunk", // a chunk size that is not hex
  "endless-chunked", // 1-byte chunks forever (as fast as the reader takes them)
  "neg-length", // Content-Length: -5
  "huge-length", // Content-Length: 99999999999999999999, 10 bytes, then close
  "nan-length", // Content-Length: abc
  "endless-headers", // a header line after another, forever
  "slowloris", // the status line, one byte every 300 ms
  "status-99", // HTTP/1.1 099
  "status-600", // HTTP/1.1 600
  "close-mid-body", // Content-Length: 100000, 1000 bytes, then the socket is destroyed
  "stall", // an endless 64 KiB-chunk download, written whenever the socket drains (for stalled clients)
  "ok", // a small valid 200 (to check the guest itself)
] as const;
export type HttpCase = (typeof HTTP_CASES)[number];

export const WS_CASES = [
  "never-read", // a 101, then the socket is paused forever: whatever the client sends piles up in front of it
  "big-frame", // a 101, then one 64 MiB binary frame toward the client
  "silent", // the handshake is read and never answered
  "status-99", // HTTP/1.1 099 to the upgrade
  "status-600", // HTTP/1.1 600 to the upgrade
  "echo", // a 101 that echoes nothing and reads everything (a sink that is not hostile)
] as const;
export type WsCase = (typeof WS_CASES)[number];

export const BIG_FRAME_BYTES = 64 * 1024 * 1024;

export interface HostileGuest {
  port: number;
  /** Connections currently open to the guest (every case included). */
  open(): number;
  /** Connections opened so far, by case ("init", "metrics", "unknown" for envd paths and strays). */
  seen(): Record<string, number>;
  /**
   * What this guest answers on envd's /metrics and /envs (for a guest attached on 49983): "ok" (a valid small JSON)
   * or one of the HTTP cases, so the e2b surface's envd client meets it. /init always answers 204.
   */
  envdReply: HttpCase;
  /** Destroys every open connection (the rig's emergency brake and its clean-up); new ones are still served. */
  closeAll(): void;
  stop(): Promise<void>;
}

interface Parsed {
  method: string;
  path: string;
  headers: Map<string, string>;
}

function parseHead(head: string): Parsed {
  const [line = "", ...rest] = head.split("\r\n");
  const [method = "", path = ""] = line.split(" ");
  const headers = new Map<string, string>();
  for (const h of rest) {
    const i = h.indexOf(":");
    if (i > 0) headers.set(h.slice(0, i).trim().toLowerCase(), h.slice(i + 1).trim());
  }
  return { method, path, headers };
}

/**
 * Writes `make()` whenever the socket drains, until it closes or `make` returns undefined: as much as the reader
 * takes, never more.
 */
function pump(sock: net.Socket, make: () => Buffer | string | undefined): void {
  const go = () => {
    for (;;) {
      if (sock.destroyed) return;
      const next = make();
      if (next === undefined || !sock.write(next)) return;
    }
  };
  sock.on("drain", go);
  go();
}

function wsAccept(key: string): string {
  return createHash("sha1").update(key + WS_GUID).digest("base64");
}

/** An unmasked server frame header for a binary message of `len` bytes. */
function serverFrameHead(len: number): Buffer {
  const b = Buffer.alloc(10);
  b[0] = 0x82;
  b[1] = 127;
  b.writeBigUInt64BE(BigInt(len), 2);
  return b;
}

export async function startHostileGuest(): Promise<HostileGuest> {
  const sockets = new Set<net.Socket>();
  const seen: Record<string, number> = {};
  const timers = new Set<ReturnType<typeof setInterval>>();
  const g = { envdReply: "ok" as HttpCase } as HostileGuest;

  const count = (name: string) => (seen[name] = (seen[name] ?? 0) + 1);

  function httpCase(sock: net.Socket, c: HttpCase): void {
    const w = (s: string | Buffer) => !sock.destroyed && sock.write(s);
    switch (c) {
      case "neg-chunk":
        w("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nZ\r\n-6\r\nQ");
        return;
      case "huge-chunk":
        w("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFFFFFF\r\nabcdefgh");
        return;
      case "bad-chunk":
        w("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n");
        return;
      case "endless-chunked":
        w("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
        pump(sock, () => "1\r\nx\r\n".repeat(4096));
        return;
      case "neg-length":
        w("HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\nhello");
        return;
      case "huge-length":
        w("HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n0123456789");
        sock.end();
        return;
      case "nan-length":
        w("HTTP/1.1 200 OK\r\nContent-Length: abc\r\n\r\nhello");
        return;
      case "endless-headers":
        w("HTTP/1.1 200 OK\r\n");
        pump(sock, () => `X-Filler: ${"h".repeat(1000)}\r\n`.repeat(16));
        return;
      case "slowloris": {
        const line = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
        let i = 0;
        const t = setInterval(() => {
          if (sock.destroyed || i >= line.length) return clearInterval(t);
          w(line[i++]!);
        }, 300);
        timers.add(t);
        sock.once("close", () => (clearInterval(t), timers.delete(t)));
        return;
      }
      case "status-99":
        w("HTTP/1.1 099 Odd\r\nContent-Length: 0\r\n\r\n");
        return;
      case "status-600":
        w("HTTP/1.1 600 Odd\r\nContent-Length: 0\r\n\r\n");
        return;
      case "close-mid-body":
        w(`HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n${"b".repeat(1000)}`);
        setTimeout(() => sock.destroy(), 20);
        return;
      case "stall": {
        w("HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\n\r\n");
        const chunk = Buffer.concat([Buffer.from("10000\r\n"), Buffer.alloc(0x10000, 115), Buffer.from("\r\n")]);
        pump(sock, () => chunk);
        return;
      }
      case "ok":
        w('HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{"ok":true}');
        return;
    }
  }

  function wsCase(sock: net.Socket, c: WsCase, req: Parsed): void {
    const w = (s: string | Buffer) => !sock.destroyed && sock.write(s);
    const accept = () => w(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${wsAccept(req.headers.get("sec-websocket-key") ?? "")}\r\n\r\n`);
    switch (c) {
      case "never-read": {
        accept();
        sock.pause();
        // A paused socket never sees the peer's FIN or RST; a ping a second (written, never read back) is how this
        // guest notices that the node closed the tunnel, so the rig can tell a released tunnel from a leaked one.
        const t = setInterval(() => w(Buffer.from([0x89, 0x00])), 1_000);
        timers.add(t);
        sock.once("close", () => (clearInterval(t), timers.delete(t)));
        return;
      }
      case "big-frame": {
        accept();
        w(serverFrameHead(BIG_FRAME_BYTES));
        const piece = Buffer.alloc(1024 * 1024, 98);
        let left = BIG_FRAME_BYTES;
        pump(sock, () => {
          if (left <= 0) return undefined;
          left -= piece.byteLength;
          return piece;
        });
        sock.resume(); // read (and drop) whatever comes back
        return;
      }
      case "silent":
        return;
      case "status-99":
        w("HTTP/1.1 099 Odd\r\nContent-Length: 0\r\n\r\n");
        return;
      case "status-600":
        w("HTTP/1.1 600 Odd\r\nContent-Length: 0\r\n\r\n");
        return;
      case "echo":
        accept();
        sock.resume();
        return;
    }
  }

  function envd(sock: net.Socket, req: Parsed): void {
    const path = req.path.split("?")[0]!;
    if (path === "/init" || path === "/health") {
      count(path.slice(1));
      // /init's body is read and dropped; 204 needs no body of ours.
      sock.write("HTTP/1.1 204 No Content\r\n\r\n");
      return;
    }
    if (path === "/metrics" || path === "/envs") {
      count(`${path.slice(1)}:${g.envdReply}`);
      if (g.envdReply !== "ok") return httpCase(sock, g.envdReply);
      const body = path === "/envs" ? "{}" : JSON.stringify({ ts: Math.floor(Date.now() / 1000), cpu_count: 2, cpu_used_pct: 1, mem_total: 1, mem_used: 1, mem_cache: 0, disk_used: 0, disk_total: 1 });
      sock.write(`HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
      return;
    }
    count("unknown");
    sock.write('HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}');
  }

  const server = net.createServer((sock) => {
    sockets.add(sock);
    sock.on("error", () => undefined);
    sock.on("close", () => sockets.delete(sock));
    let buf = "";
    let answered = false;
    const onData = (d: Buffer) => {
      if (answered) return; // bodies of later requests on this connection are ignored: one reply per connection
      buf += d.toString("latin1");
      const end = buf.indexOf("\r\n\r\n");
      if (end < 0) {
        if (buf.length > 64 * 1024) sock.destroy();
        return;
      }
      answered = true;
      const req = parseHead(buf.slice(0, end));
      const path = req.path.split("?")[0]!;
      const ws = /^\/ws\/([a-z0-9-]+)$/.exec(path);
      const http = /^\/([a-z0-9-]+)$/.exec(path);
      if (ws && (WS_CASES as readonly string[]).includes(ws[1]!)) {
        count(`ws/${ws[1]}`);
        wsCase(sock, ws[1] as WsCase, req);
      } else if (http && (HTTP_CASES as readonly string[]).includes(http[1]!)) {
        count(http[1]!);
        httpCase(sock, http[1] as HttpCase);
      } else envd(sock, req);
    };
    sock.on("data", onData);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  g.port = (server.address() as net.AddressInfo).port;
  g.open = () => sockets.size;
  g.seen = () => ({ ...seen });
  g.closeAll = () => {
    for (const s of sockets) s.destroy();
  };
  g.stop = async () => {
    for (const t of timers) clearInterval(t);
    for (const s of sockets) s.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
  return g;
}
