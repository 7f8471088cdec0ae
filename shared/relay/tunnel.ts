// The node's ports relay (docs/envd-relay.md "Tunnel"): `GET /v1/sandboxes/{claimId}/ports/{port}` with
// `Upgrade: tcp` on the owning sandboxd; a 101 turns the connection into a raw byte pipe to guest 127.0.0.1:{port}.
// One fresh connection per use. The claim token makes the relay active (wakes a paused sandbox, counts as
// activity); the root token keeps it passive (never wakes: a paused sandbox answers 409).
import net from "node:net";
import tls from "node:tls";
import { ErrorBody } from "../sandboxd/index.ts";

export const TUNNEL_DIAL_TIMEOUT_MS = 10_000;
/** The node's reply head is capped; a longer one is a protocol error, not something to buffer. */
export const TUNNEL_MAX_HEAD_BYTES = 16 * 1024;

export interface TunnelTarget {
  /** sandboxd address: `host:port` or an `http(s)://` origin. */
  address: string;
  /** Raw claim id (`sb_…`). */
  claimId: string;
  port: number;
  /** Claim token (active) or root token (passive). */
  token: string;
}

/** The node answered, but not 101: its status and `{"error"}` text. */
export class TunnelRefused extends Error {
  constructor(
    readonly status: number,
    readonly nodeMessage: string,
  ) {
    super(`node refused the ports relay: ${status} ${nodeMessage}`);
    this.name = "TunnelRefused";
  }
}

/** The node could not be dialled, or its handshake broke. Never carries the address to a client. */
export class TunnelUnreachable extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "TunnelUnreachable";
  }
}

/** The node did not complete the Upgrade handshake within the dial bound (a wake slower than --wake-timeout, or a hung node). */
export class TunnelTimedOut extends TunnelUnreachable {
  constructor() {
    super("ports relay handshake timed out");
    this.name = "TunnelTimedOut";
  }
}

export function endpointOf(address: string): { host: string; port: number; secure: boolean; authority: string } {
  const url = new URL(address.includes("://") ? address : `http://${address}`);
  const secure = url.protocol === "https:";
  const port = url.port ? Number(url.port) : secure ? 443 : 80;
  const host = url.hostname.replace(/^\[|\]$/g, "");
  return { host, port, secure, authority: url.host };
}

/**
 * Dial the node and complete the Upgrade handshake. Resolves with the socket positioned at the first guest byte
 * (bytes that arrived with the 101 are pushed back onto it), paused: the caller reads from it when ready.
 */
export function openTunnel(t: TunnelTarget, o: { signal?: AbortSignal; dialTimeoutMs?: number } = {}): Promise<net.Socket> {
  const ep = endpointOf(t.address);
  return new Promise<net.Socket>((resolve, reject) => {
    const sock: net.Socket = ep.secure
      ? tls.connect({ host: ep.host, port: ep.port, servername: net.isIP(ep.host) ? undefined : ep.host, ALPNProtocols: ["http/1.1"] })
      : net.connect({ host: ep.host, port: ep.port });
    sock.setNoDelay(true);
    let settled = false;
    let head: Buffer = Buffer.alloc(0);
    const timer = setTimeout(() => fail(new TunnelTimedOut()), o.dialTimeoutMs ?? TUNNEL_DIAL_TIMEOUT_MS);
    const onAbort = () => fail(new TunnelUnreachable("ports relay dial aborted"));
    o.signal?.addEventListener("abort", onAbort, { once: true });
    const cleanup = () => {
      clearTimeout(timer);
      o.signal?.removeEventListener("abort", onAbort);
      sock.removeListener("data", onData);
      sock.removeListener("error", onError);
      sock.removeListener("end", onEnd);
    };
    function fail(err: Error) {
      if (settled) return;
      settled = true;
      cleanup();
      sock.destroy();
      reject(err);
    }
    const onError = (err: Error) => fail(new TunnelUnreachable(`ports relay dial failed: ${err.message}`, { cause: err }));
    const onEnd = () => fail(new TunnelUnreachable("node closed the connection during the ports relay handshake"));
    const onData = (chunk: Buffer) => {
      head = head.length ? Buffer.concat([head, chunk]) : chunk;
      const r = relayReply(head);
      if (r === undefined) return;
      if ("rest" in r) {
        settled = true;
        cleanup();
        sock.pause();
        if (r.rest.length) sock.unshift(r.rest);
        resolve(sock);
        return;
      }
      if (r.error instanceof TunnelUnreachable) return fail(r.error);
      settled = true;
      cleanup();
      sock.destroy();
      reject(r.error);
    };
    sock.on("data", onData);
    sock.once("error", onError);
    sock.once("end", onEnd);
    sock.once(ep.secure ? "secureConnect" : "connect", () => {
      sock.write(relayRequest(t, ep.authority));
    });
  });
}

/**
 * The node's answer to the Upgrade so far: undefined while its head is incomplete; `rest` = the bytes after a 101
 * (the first guest bytes); else the error to fail with (a refusal keeps the small `{"error"}` body that arrives
 * with its head).
 */
export function relayReply(head: Buffer): { rest: Buffer } | { error: TunnelRefused | TunnelUnreachable } | undefined {
  const end = head.indexOf("\r\n\r\n");
  if (end < 0) return head.length > TUNNEL_MAX_HEAD_BYTES ? { error: new TunnelUnreachable("ports relay reply head too large") } : undefined;
  const firstLine = head.subarray(0, Math.min(end, head.indexOf("\r\n"))).toString("latin1");
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(firstLine)?.[1] ?? NaN);
  const rest = head.subarray(end + 4);
  if (status === 101) return { rest };
  if (!Number.isInteger(status)) return { error: new TunnelUnreachable("ports relay answered something that is not HTTP") };
  return { error: new TunnelRefused(status, errorText(rest)) };
}

/** The Upgrade request that opens a ports relay. */
export function relayRequest(t: TunnelTarget, authority: string): string {
  return (
    `GET /v1/sandboxes/${encodeURIComponent(t.claimId)}/ports/${t.port} HTTP/1.1\r\n` +
    `Host: ${authority}\r\nAuthorization: Bearer ${t.token}\r\nUpgrade: tcp\r\nConnection: Upgrade\r\n\r\n`
  );
}

function errorText(body: Buffer): string {
  const text = body.toString("utf8").trim();
  try {
    const parsed = ErrorBody.safeParse(JSON.parse(text));
    if (parsed.success) return parsed.data.error;
  } catch {
    // not JSON: fall through to the raw text (bounded)
  }
  return text.slice(0, 200);
}
