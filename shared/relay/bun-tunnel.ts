// The ports relay (tunnel.ts) dialled with Bun's own socket API, for plain-TCP nodes: the relay's HTTP/1.1 guest leg
// runs on it (h1.ts via the GuestWire interface). Measured against node:net, it costs less per request (fewer JS
// event-emitter hops per chunk and per connection; docs/envd-relay.md "Performance"). TLS nodes, --guest-http2
// and WebSocket keep openTunnel's node:net socket (node:http2 and the WebSocket pump need a node stream).
import type { Socket, SocketHandler } from "bun";
import type { GuestWire, WireEvents } from "./h1.ts";
import { endpointOf, relayReply, relayRequest, TUNNEL_DIAL_TIMEOUT_MS, TunnelTimedOut, TunnelUnreachable, type TunnelRefused, type TunnelTarget } from "./tunnel.ts";

/** One Bun socket through the node's ports relay: first the Upgrade handshake, then a GuestWire. */
export class BunTunnel implements GuestWire {
  private sock: Socket<BunTunnel> | undefined;
  private upgraded = false;
  private head: Buffer = Buffer.alloc(0);
  /** Bytes the kernel did not take yet (write returned short); the next `drain` retries them. */
  private unsent: Buffer[] = [];
  private drainWaiters: Array<() => void> = [];
  /** Events that arrived before a consumer attached (the guest's first bytes can come with the 101). */
  private backlog: Array<(e: WireEvents) => void> = [];
  private events: WireEvents | undefined;
  private closeHooks: Array<() => void> = [];
  private paused = false;
  /** The relay's budget (limits.ts): while it says no, resume() keeps the guest paused (the next pull asks again). */
  gate: (() => boolean) | undefined;
  private settle: ((err?: TunnelRefused | TunnelUnreachable) => void) | undefined;
  destroyed = false;

  /** Route the wire's events to `e` (what arrived before is replayed first). */
  attach(e: WireEvents): void {
    this.events = e;
    const pending = this.backlog;
    this.backlog = [];
    for (const ev of pending) ev(e);
  }

  /** Runs once when the socket closes, however it closes. */
  onClose(fn: () => void): void {
    if (this.destroyed) fn();
    else this.closeHooks.push(fn);
  }

  write(data: Buffer | string): boolean {
    if (this.destroyed || !this.sock) return true;
    const buf = typeof data === "string" ? Buffer.from(data, "latin1") : data;
    if (this.unsent.length) {
      this.unsent.push(buf);
      return false;
    }
    const n = this.sock.write(buf);
    if (n < 0) return true; // closed: the caller sees `destroyed`
    if (n < buf.length) {
      this.unsent.push(buf.subarray(n));
      return false;
    }
    return true;
  }

  drained(): Promise<void> {
    if (!this.unsent.length || this.destroyed) return Promise.resolve();
    return new Promise<void>((resolve) => this.drainWaiters.push(resolve));
  }

  pause(): void {
    if (this.paused || this.destroyed) return;
    this.paused = true;
    this.sock?.pause();
  }

  resume(): void {
    if (!this.paused || this.destroyed || (this.gate !== undefined && !this.gate())) return;
    this.paused = false;
    this.sock?.resume();
  }

  destroy(): void {
    if (this.destroyed) return;
    this.sock?.terminate();
    this.closed();
  }

  private emit(ev: (e: WireEvents) => void): void {
    if (this.events) ev(this.events);
    else this.backlog.push(ev);
  }

  private closed(err?: Error): void {
    if (this.destroyed) return;
    this.destroyed = true;
    this.settle?.(new TunnelUnreachable(err ? `ports relay dial failed: ${err.message}` : "node closed the connection during the ports relay handshake", err ? { cause: err } : undefined));
    const waiters = this.drainWaiters;
    this.drainWaiters = [];
    for (const w of waiters) w();
    if (this.upgraded) {
      if (err) this.emit((e) => e.error(err));
      this.emit((e) => e.close());
    }
    const hooks = this.closeHooks;
    this.closeHooks = [];
    for (const h of hooks) h();
  }

  private static readonly handlers: SocketHandler<BunTunnel> = {
    open(s) {
      const t = s.data;
      t.sock = s;
      if (t.destroyed) return s.terminate();
      s.setNoDelay(true);
      t.write(relayRequest(t.target, t.authority));
    },
    data(s, chunk) {
      const t = s.data;
      if (t.upgraded) return t.emit((e) => e.data(chunk));
      t.head = t.head.length ? Buffer.concat([t.head, chunk]) : chunk;
      const r = relayReply(t.head);
      if (r === undefined) return;
      t.head = Buffer.alloc(0);
      if ("error" in r) {
        const settle = t.settle;
        t.settle = undefined;
        settle?.(r.error);
        t.destroy();
        return;
      }
      t.upgraded = true;
      if (r.rest.length) t.emit((e) => e.data(Buffer.from(r.rest)));
      const settle = t.settle;
      t.settle = undefined;
      settle?.();
    },
    drain(s) {
      const t = s.data;
      while (t.unsent.length) {
        const buf = t.unsent[0]!;
        const n = s.write(buf);
        if (n < 0) return;
        if (n < buf.length) {
          t.unsent[0] = buf.subarray(n);
          return;
        }
        t.unsent.shift();
      }
      const waiters = t.drainWaiters;
      t.drainWaiters = [];
      for (const w of waiters) w();
    },
    end(s) {
      const t = s.data;
      if (t.upgraded) t.emit((e) => e.end());
      else t.closed();
    },
    close(s, err) {
      s.data.closed(err);
    },
    error(s, err) {
      s.data.closed(err);
    },
    connectError(s, err) {
      s.data.closed(err);
    },
  };

  private constructor(
    private readonly target: TunnelTarget,
    private readonly authority: string,
  ) {}

  /**
   * Dial a plain-TCP node and complete the Upgrade handshake. Rejects as openTunnel does (TunnelRefused with the
   * node's status, TunnelUnreachable); resolves with a tunnel whose guest bytes wait for `attach`.
   */
  static open(t: TunnelTarget, o: { signal?: AbortSignal; dialTimeoutMs?: number } = {}): Promise<BunTunnel> {
    const ep = endpointOf(t.address);
    const tunnel = new BunTunnel(t, ep.authority);
    return new Promise<BunTunnel>((resolve, reject) => {
      const onAbort = () => fail(new TunnelUnreachable("ports relay dial aborted"));
      const timer = setTimeout(() => fail(new TunnelTimedOut()), o.dialTimeoutMs ?? TUNNEL_DIAL_TIMEOUT_MS);
      function fail(err: TunnelRefused | TunnelUnreachable) {
        tunnel.settle?.(err);
        tunnel.destroy();
      }
      tunnel.settle = (err) => {
        tunnel.settle = undefined;
        clearTimeout(timer);
        o.signal?.removeEventListener("abort", onAbort);
        if (err) reject(err);
        else resolve(tunnel);
      };
      if (o.signal?.aborted) return fail(new TunnelUnreachable("ports relay dial aborted"));
      o.signal?.addEventListener("abort", onAbort, { once: true });
      Bun.connect<BunTunnel>({ hostname: ep.host, port: ep.port, data: tunnel, socket: BunTunnel.handlers }).catch((err: Error) => tunnel.closed(err));
    });
  }
}
