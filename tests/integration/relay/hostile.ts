// The hostile-guest rig for the relay's bounds (issue 17 cases 3-5): raw TCP guests behind the simulator's ports
// relay that misbehave on purpose, a raw WebSocket client that can stop reading, and readers for the proxy's
// gauges and a process's CPU time. The guests count their open connections: that is the node's side of each
// tunnel (the simulator closes its guest connection when the proxy closes the tunnel).
import { createHash } from "node:crypto";
import net from "node:net";
import { FrameReader } from "#shared/relay/ws-frames.ts";
import type { Child } from "../e2b/process.ts";

const GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

export interface HostileGuest {
  port: number;
  /** Connections open right now. */
  open(): number;
  /** Connections accepted so far. */
  accepted(): number;
  /** The sockets of upgraded WebSockets, in order (for the test to write frames on). */
  upgraded: net.Socket[];
  stop(): Promise<void>;
}

export type GuestMode =
  /** Reads the request head, answers nothing, ever. */
  | "silent"
  /** Answers the WebSocket upgrade, then never reads again. */
  | "deaf-ws"
  /** Answers the WebSocket upgrade and reads (discarding) what arrives; the test writes frames on `upgraded`. */
  | "ws";

export async function startHostileGuest(mode: GuestMode): Promise<HostileGuest> {
  let open = 0;
  let accepted = 0;
  const upgraded: net.Socket[] = [];
  const all = new Set<net.Socket>();
  const server = net.createServer((sock) => {
    open++;
    accepted++;
    all.add(sock);
    sock.once("close", () => {
      open--;
      all.delete(sock);
    });
    sock.on("error", () => undefined);
    let head = Buffer.alloc(0);
    const onData = (c: Buffer) => {
      head = Buffer.concat([head, c]);
      const end = head.indexOf("\r\n\r\n");
      if (end < 0 || mode === "silent") return;
      sock.off("data", onData);
      const key = /sec-websocket-key:\s*(\S+)/i.exec(head.subarray(0, end).toString("latin1"))?.[1] ?? "";
      const accept = createHash("sha1").update(key + GUID).digest("base64");
      sock.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`);
      upgraded.push(sock);
      if (mode === "deaf-ws") sock.pause();
      else sock.on("data", () => undefined);
    };
    sock.on("data", onData);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  return {
    port: (server.address() as net.AddressInfo).port,
    open: () => open,
    accepted: () => accepted,
    upgraded,
    stop: () =>
      new Promise<void>((r) => {
        for (const s of all) s.destroy();
        server.close(() => r());
      }),
  };
}

/** An unmasked server frame header (the guest's side) for a payload of `len` bytes. */
export function serverFrameHead(op: number, len: number, fin = true): Buffer {
  const b0 = (fin ? 0x80 : 0) | op;
  if (len < 126) return Buffer.from([b0, len]);
  if (len < 65536) {
    const h = Buffer.alloc(4);
    h[0] = b0;
    h[1] = 126;
    h.writeUInt16BE(len, 2);
    return h;
  }
  const h = Buffer.alloc(10);
  h[0] = b0;
  h[1] = 127;
  h.writeBigUInt64BE(BigInt(len), 2);
  return h;
}

/** Write `data` honouring the socket's backpressure; resolves once all of it is handed to the kernel. */
export async function writeAll(sock: net.Socket, data: Buffer, piece = 64 * 1024): Promise<void> {
  for (let off = 0; off < data.length; off += piece) {
    if (sock.destroyed) return;
    if (!sock.write(data.subarray(off, Math.min(off + piece, data.length)))) await new Promise<void>((r) => sock.once("drain", r));
  }
}

/**
 * A WebSocket client on a raw socket: it can stop reading (pause) so the proxy sees a client that cannot take more,
 * and it records every message and the close frame in order.
 */
export interface RawWsClient {
  sock: net.Socket;
  messages: Buffer[];
  /** The close frame's code, once one arrived; or "reset" when the connection dropped without one. */
  closeCode: number | "reset" | undefined;
  status: number;
}

export function rawWsClient(port: number, host: string, token: string, path = "/ws"): Promise<RawWsClient> {
  return dialRawWs(port, host, token, path).answered;
}

/** The client at once (its socket, to drop it early) and a promise of the proxy's answer to the upgrade. */
export function dialRawWs(port: number, host: string, token: string, path = "/ws"): { client: RawWsClient; answered: Promise<RawWsClient> } {
  const sock = net.connect({ host: "127.0.0.1", port });
  const c: RawWsClient = { sock, messages: [], closeCode: undefined, status: 0 };
  const answered = new Promise<RawWsClient>((resolve, reject) => {
    const reader = new FrameReader(Number.MAX_SAFE_INTEGER);
    let head = Buffer.alloc(0);
    let upgraded = false;
    const sink = (_fin: boolean, op: number, payload: Buffer) => {
      if (op === 8) c.closeCode = payload.length >= 2 ? payload.readUInt16BE(0) : 1005;
      else if (op === 1 || op === 2) c.messages.push(Buffer.from(payload));
      return true;
    };
    sock.on("data", (d: Buffer) => {
      if (upgraded) return void reader.feed(d, 0, sink);
      head = Buffer.concat([head, d]);
      const end = head.indexOf("\r\n\r\n");
      if (end < 0) return;
      c.status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head.toString("latin1"))?.[1] ?? 0);
      if (c.status !== 101) return resolve(c);
      upgraded = true;
      const rest = head.subarray(end + 4);
      if (rest.length) reader.feed(rest, 0, sink);
      resolve(c);
    });
    sock.once("close", () => {
      if (c.closeCode === undefined) c.closeCode = "reset";
    });
    sock.once("error", (e) => (upgraded ? undefined : reject(e)));
    sock.write(
      `GET ${path} HTTP/1.1\r\nHost: ${host}\r\nX-Access-Token: ${token}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
        `Sec-WebSocket-Key: ${Buffer.from("0123456789abcdef").toString("base64")}\r\nSec-WebSocket-Version: 13\r\n\r\n`,
    );
  });
  return { client: c, answered };
}

/** One gauge or counter sample from a metrics listener's Prometheus page (the first series of that name). */
export async function gauge(metricsUrl: string, name: string): Promise<number> {
  const text = await (await fetch(`${metricsUrl}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`${name} `) || l.startsWith(`${name}{`));
  return line ? Number(line.slice(line.lastIndexOf(" ") + 1)) : NaN;
}

/** User + system CPU seconds a process has used (Linux /proc/<pid>/stat, in clock ticks of 1/100 s). */
export async function cpuSeconds(pid: number): Promise<number> {
  const stat = await Bun.file(`/proc/${pid}/stat`).text();
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** Create a sandbox through the REST surface: its id, claim id (for attachGuest) and envd access token. */
export async function createSandbox(apiUrl: string, apiKey: string): Promise<{ id: string; claimId: string; token: string }> {
  const r = await fetch(`${apiUrl}/v2/sandboxes`, { method: "POST", headers: { "x-api-key": apiKey, "content-type": "application/json" }, body: '{"templateID":"img"}' });
  if (r.status !== 201) throw new Error(`create answered ${r.status}: ${await r.text()}`);
  const sbx = (await r.json()) as { sandboxID: string; envdAccessToken: string };
  return { id: sbx.sandboxID, claimId: sbx.sandboxID.replace("sb-", "sb_"), token: sbx.envdAccessToken };
}

/** The addresses a spawned sandbox-e2b (started with `--metrics-bind-address`) logs once it listens. */
export async function e2bListeners(child: Child): Promise<{ api: string; proxyPort: number; proxyUrl: string; metricsUrl: string }> {
  const api = `http://127.0.0.1:${(await child.waitFor("e2b surface listening")).port}`;
  const proxyPort = Number((await child.waitFor("envd proxy listening")).port);
  const metricsUrl = `http://127.0.0.1:${(await child.waitFor("metrics listening")).port}`;
  return { api, proxyPort, proxyUrl: `http://127.0.0.1:${proxyPort}`, metricsUrl };
}
