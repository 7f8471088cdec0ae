// The hostile client: raw sockets to the envd proxy that do what an attacker with one sandbox (and its access
// token) or with no credential at all can do: ask for each hostile guest reply, hold thousands of downloads open
// without reading, upgrade to a WebSocket and drop, flood it with data or a 64 MiB frame, and look up junk ids.
// Every primitive is bounded in time and count, and every socket it opens is closed by `closeAll()`.
import { randomBytes } from "node:crypto";
import net from "node:net";
import type { HttpCase, WsCase } from "./guest.ts";

export interface Target {
  /** The proxy's address, host:port on 127.0.0.1. */
  proxy: { host: string; port: number };
  domain: string;
  /** The attacker's own sandbox (public id, sb-...) and its envd access token. */
  sandboxId: string;
  token: string;
  /** The guest port the hostile guest is attached on. */
  guestPort: number;
}

export interface Outcome {
  /** The status line the proxy answered, "" when it answered none. */
  status: string;
  /** Bytes of the reply received (head included). */
  bytes: number;
  /** How it ended: the proxy closed, the deadline passed, or the socket failed. */
  end: "closed" | "deadline" | "error";
  ms: number;
}

export class HostileClient {
  private readonly socks = new Set<net.Socket>();

  constructor(private readonly t: Target) {}

  private head(path: string, extra: Record<string, string> = {}, host?: string): string {
    const h: Record<string, string> = {
      host: host ?? `${this.t.guestPort}-${this.t.sandboxId}.${this.t.domain}`,
      "x-access-token": this.t.token,
      ...extra,
    };
    return `GET ${path} HTTP/1.1\r\n${Object.entries(h).map(([k, v]) => `${k}: ${v}`).join("\r\n")}\r\n\r\n`;
  }

  private connect(): net.Socket {
    const s = net.connect({ host: this.t.proxy.host, port: this.t.proxy.port });
    s.on("error", () => undefined);
    this.socks.add(s);
    s.once("close", () => this.socks.delete(s));
    return s;
  }

  /** Sends `raw`, reads the reply until the proxy closes or `deadlineMs` passes (then the client leaves). */
  exchange(raw: string | Buffer, deadlineMs: number): Promise<Outcome> {
    const started = performance.now();
    const s = this.connect();
    let head = "";
    let bytes = 0;
    return new Promise((resolve) => {
      let done = false;
      const finish = (end: Outcome["end"]) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        s.destroy();
        resolve({ status: /^HTTP\/1\.1 (\d{3}[^\r]*)/.exec(head)?.[1] ?? "", bytes, end, ms: performance.now() - started });
      };
      const timer = setTimeout(() => finish("deadline"), deadlineMs);
      s.on("data", (d: Buffer) => {
        bytes += d.byteLength;
        if (head.length < 512) head += d.toString("latin1", 0, Math.min(d.byteLength, 512));
        // One answer per request: a complete error reply with its body means the proxy is done with us.
        if (/\r\n\r\n[\s\S]*\}\n?$/.test(head) && /^HTTP\/1\.1 [45]\d\d/.test(head)) finish("closed");
      });
      s.once("close", () => finish("closed"));
      s.once("error", () => finish("error"));
      s.write(raw);
    });
  }

  /** Asks for one hostile guest reply (GET /<case>) and gives up after `deadlineMs`. */
  httpCase(c: HttpCase, deadlineMs: number): Promise<Outcome> {
    return this.exchange(this.head(`/${c}`), deadlineMs);
  }

  /** A WebSocket upgrade to /ws/<case>; the reply head decides (101, an error, or nothing by the deadline). */
  wsCase(c: WsCase, deadlineMs: number): Promise<Outcome> {
    return this.exchange(this.head(`/ws/${c}`, wsHeaders()), deadlineMs);
  }

  /**
   * `n` downloads of the guest's endless stream, each asked for and then never read (the socket is paused, so TCP
   * pushes back on the proxy). They stay open until closeAll(). Resolves once every request is written.
   */
  async stalledDownloads(n: number, perTick = 50): Promise<void> {
    for (let i = 0; i < n; i += perTick) {
      await Promise.all(
        Array.from({ length: Math.min(perTick, n - i) }, () => {
          const s = this.connect();
          return new Promise<void>((resolve) => {
            s.once("connect", () => {
              s.write(this.head("/stall"));
              s.pause();
              resolve();
            });
            s.once("error", () => resolve());
          });
        }),
      );
    }
  }

  /** Opens a WebSocket through the proxy to the guest `c` and, once the 101 arrives, writes `send` bytes of masked frames. */
  async wsFlood(c: WsCase, send: number, frameBytes: number, deadlineMs: number): Promise<Outcome> {
    const started = performance.now();
    const s = this.connect();
    return new Promise((resolve) => {
      let head = "";
      let upgraded = false;
      let done = false;
      const finish = (end: Outcome["end"]) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        s.destroy();
        resolve({ status: /^HTTP\/1\.1 (\d{3}[^\r]*)/.exec(head)?.[1] ?? "", bytes: head.length, end, ms: performance.now() - started });
      };
      const timer = setTimeout(() => finish("deadline"), deadlineMs);
      s.once("close", () => finish("closed"));
      s.on("data", (d: Buffer) => {
        if (upgraded) return;
        head += d.toString("latin1");
        if (!head.includes("\r\n\r\n")) return;
        if (!head.startsWith("HTTP/1.1 101")) return finish("closed");
        upgraded = true;
        let left = send;
        const frame = maskedFrame(Buffer.alloc(frameBytes, 99));
        const go = () => {
          while (left > 0 && !s.destroyed) {
            left -= frameBytes;
            if (!s.write(frame)) return;
          }
        };
        s.on("drain", go);
        go();
      });
      s.write(this.head(`/ws/${c}`, wsHeaders()));
    });
  }

  /** `n` WebSocket upgrades to the echo guest, each dropped (socket destroyed) as soon as the 101 arrives. */
  async upgradeAndDrop(n: number, concurrency = 20): Promise<number> {
    let upgraded = 0;
    let next = 0;
    const one = async () => {
      while (next < n) {
        next++;
        const r = await this.exchangeUntilHead(this.head("/ws/echo", wsHeaders()), 5_000);
        if (r.startsWith("HTTP/1.1 101")) upgraded++;
      }
    };
    await Promise.all(Array.from({ length: concurrency }, one));
    return upgraded;
  }

  private exchangeUntilHead(raw: string, deadlineMs: number): Promise<string> {
    const s = this.connect();
    return new Promise((resolve) => {
      let head = "";
      const finish = () => {
        clearTimeout(timer);
        s.destroy();
        resolve(head);
      };
      const timer = setTimeout(finish, deadlineMs);
      s.on("data", (d: Buffer) => {
        head += d.toString("latin1");
        if (head.includes("\r\n\r\n")) finish();
      });
      s.once("close", finish);
      s.write(raw);
    });
  }

  /**
   * Anonymous junk lookups: well-formed but unknown sandbox ids with made-up tokens, `concurrency` at a time until
   * `stop()` says so. Each needs the proxy to look the id up; none carries a credential anyone issued.
   */
  async junkLookups(stop: () => boolean, concurrency = 8): Promise<{ sent: number; statuses: Record<string, number> }> {
    let sent = 0;
    const statuses: Record<string, number> = {};
    const one = async () => {
      while (!stop()) {
        const id = `sb-${randomBytes(8).toString("hex")}`;
        const host = `49983-${id}.${this.t.domain}`;
        const raw = `GET /health HTTP/1.1\r\nhost: ${host}\r\nx-access-token: ${randomBytes(32).toString("hex")}\r\n\r\n`;
        const r = await this.exchange(raw, 5_000);
        sent++;
        const code = r.status.slice(0, 3) || r.end;
        statuses[code] = (statuses[code] ?? 0) + 1;
      }
    };
    await Promise.all(Array.from({ length: concurrency }, one));
    return { sent, statuses };
  }

  /** Sockets this client still holds open. */
  open(): number {
    return this.socks.size;
  }

  closeAll(): void {
    for (const s of this.socks) s.destroy();
  }
}

function wsHeaders(): Record<string, string> {
  return { upgrade: "websocket", connection: "Upgrade", "sec-websocket-version": "13", "sec-websocket-key": randomBytes(16).toString("base64") };
}

/** One masked binary client frame (RFC 6455 §5.3). */
function maskedFrame(payload: Buffer): Buffer {
  const len = payload.byteLength;
  const head = len < 126 ? 2 : len < 65536 ? 4 : 10;
  const out = Buffer.allocUnsafe(head + 4 + len);
  out[0] = 0x82;
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
