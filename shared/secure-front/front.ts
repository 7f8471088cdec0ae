// A TLS front for a Bun.serve app that needs the client's certificate (docs/decisions.md "kubelet-api-auth" and
// "secure-front"). Bun.serve never shows a handler the peer certificate; node:tls does (`getPeerCertificate`). So a
// node:tls server terminates TLS, the caller's `peer` callback decides what the connection's certificate means, and
// each connection is relayed to an internal Bun.serve on a Unix socket in a fresh 0700 directory, so no other user
// of the machine can reach it (a loopback TCP port can be reached by anyone, and a pipe's source port can be
// reproduced from another address). The peer travels with the connection: the front gives each connection a random
// secret, adds it to every request head it forwards (request-framer.ts) and drops a client's own copy; the internal
// handler finds the peer by that secret. A request without a known secret is refused, whatever it claims. HTTP
// parsing, streaming and keep-alive stay Bun's; the front adds no syscall per request (one write per chunk read).
// A kept-alive connection idle after its last response is closed after keepAliveIdleMs (keep-alive.ts).
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import tls from "node:tls";
import type { Server } from "bun";
import type { Log } from "../log/index.ts";
import { internalHeaders } from "./internal-headers.ts";
import { KEEP_ALIVE_IDLE_MS, ResponseTracker } from "./keep-alive.ts";
import { RequestFramer } from "./request-framer.ts";

export interface SecureFrontOptions<P> {
  /** Names the internal headers (`x-<name>-connection`) and the socket's directory; lower-case and dashes. */
  name: string;
  bindAddress: string;
  port: number;
  /** The node:tls server options (certificate, key, requestCert, ca, versions, ciphers, handshakeTimeout). */
  tls: tls.TlsOptions;
  /**
   * What the connection's client certificate means, asked once per connection after the handshake. A throw closes
   * the connection (fail closed): a caller that wants "certless" on a failure returns that itself.
   */
  peer(sock: tls.TLSSocket): P | Promise<P>;
  handler(req: Request, peer: P): Response | Promise<Response>;
  /** Renders what the front answers itself: a refused head (400, 405, 413, 431, 501), a forged request, a crash. */
  errorResponse(code: number, message: string): Response;
  /** The message of the 500 a handler's throw gets (the error's own text never reaches the client). */
  internalErrorMessage?: string;
  /** Largest request body accepted (a declared larger one is refused with 413 before it is read). */
  maxBodyBytes: number;
  /** Lower-cased header name → whether it carries identity (its lines are kept one value each). */
  isIdentityHeader?: (lowerName: string) => boolean;
  /** A TLS connection silent (both ways) this long is closed; absent: the client or the app decides. */
  idleTimeoutMs?: number;
  /**
   * A kept-alive connection whose responses have all ended and that sends nothing more is closed after this long
   * (default KEEP_ALIVE_IDLE_MS, the relay listener's; 0: never). An open response (a watch) is never timed by it.
   */
  keepAliveIdleMs?: number;
  /**
   * Go's ReadHeaderTimeout: from the handshake to the first full head, and from the first byte of each later head to
   * its end, at most this long (default HEADER_TIMEOUT_MS). A body, a response or a watch is never timed by it.
   */
  headerTimeoutMs?: number;
  /** A connection that has not finished its TLS handshake this long after connecting is closed (default 10 s). */
  handshakeTimeoutMs?: number;
  /** Open connections at most (handshaking ones included); one more is closed at once (default 2048). */
  maxConnections?: number;
  log: Log;
}

export interface SecureFront {
  /** The port actually bound (the option's, or the one the OS picked for 0). */
  port: number;
  /** The internal listener's socket path (in a directory only this user may enter). */
  internalSocket: string;
  /** Stops accepting, and ends every open connection (open watches included). */
  stop(): Promise<void>;
}

const NO_IDLE_TIMEOUT = { idleTimeout: 0 };
/** The Kubernetes apiserver's ReadHeaderTimeout (genericapiserver's secure serving). */
export const HEADER_TIMEOUT_MS = 32_000;
/** As Go's http.Transport TLSHandshakeTimeout: far more than a real handshake takes. */
export const HANDSHAKE_TIMEOUT_MS = 10_000;
/** Each connection holds three descriptors (TLS socket, both ends of the Unix pipe): well under a pod's usual 1M. */
export const MAX_CONNECTIONS = 2048;
const INTERNAL_ERROR = "Internal error occurred: the request could not be served";

export async function startSecureFront<P>(o: SecureFrontOptions<P>): Promise<SecureFront> {
  const names = internalHeaders(o.name);
  /** Connection secret → what the `peer` callback said about its certificate. */
  const peers = new Map<string, P>();
  const dir = mkdtempSync(join(tmpdir(), `${o.name}-`)); // mode 0700
  const internalSocket = join(dir, "internal.sock");
  const internal: Server<unknown> = Bun.serve({
    unix: internalSocket,
    development: false,
    // Watches stay open for minutes; the TLS front owns connection lifetimes. Bun honours idleTimeout on a Unix
    // socket too (a silent watch was cut at 10 s without it), though its types list it only for TCP.
    ...(NO_IDLE_TIMEOUT as object),
    // A backstop only: the front refuses a declared larger body, and an app that reads a chunked one counts it.
    maxRequestBodySize: o.maxBodyBytes * 2,
    error(err) {
      o.log.error({ front: o.name, err: err.message }, "request failed");
      return o.errorResponse(500, o.internalErrorMessage ?? INTERNAL_ERROR);
    },
    fetch(req) {
      const secret = req.headers.get(names.connection);
      if (secret === null || !peers.has(secret)) return o.errorResponse(403, "connections are accepted only through the secure port");
      const peer = peers.get(secret) as P;
      const refused = req.headers.get(names.refused);
      if (refused !== null) {
        const [code = "400", ...words] = refused.split(" ");
        return o.errorResponse(Number(code), words.join(" "));
      }
      // A Host that makes no URL with the target (`Host: evil/x#`) leaves Bun's req.url relative, and a handler's
      // `new URL(req.url)` would throw: a 400 here, as Go's server answers a malformed Host.
      if (!URL.canParse(req.url)) return o.errorResponse(400, "the request target and Host do not form a valid URL");
      for (const h of names.all) req.headers.delete(h);
      return o.handler(req, peer);
    },
  });
  const sockets = new Set<net.Socket>();

  const headerTimeoutMs = o.headerTimeoutMs ?? HEADER_TIMEOUT_MS;
  const keepAliveIdleMs = o.keepAliveIdleMs ?? KEEP_ALIVE_IDLE_MS;
  const maxConnections = o.maxConnections ?? MAX_CONNECTIONS;
  let open = 0;
  const front = tls.createServer({ ...o.tls, handshakeTimeout: o.handshakeTimeoutMs ?? o.tls.handshakeTimeout ?? HANDSHAKE_TIMEOUT_MS }, (sock) => {
    sockets.add(sock);
    if (o.idleTimeoutMs) sock.setTimeout(o.idleTimeoutMs, () => sock.destroy());
    // Armed while a head is awaited (until the first) or being read (any later one); a watch's open response is not.
    let headTimer: ReturnType<typeof setTimeout> | undefined;
    const armHeadTimer = () => {
      headTimer = setTimeout(() => {
        o.log.debug({ front: o.name, remote: sock.remoteAddress, timeoutMs: headerTimeoutMs }, "request head not received in time; closing the connection");
        sock.destroy();
      }, headerTimeoutMs);
    };
    const clearHeadTimer = () => {
      clearTimeout(headTimer);
      headTimer = undefined;
    };
    armHeadTimer();
    // Armed when the last outstanding response has ended (keep-alive.ts); any byte from the client disarms it.
    let idleTimer: ReturnType<typeof setTimeout> | undefined;
    const clearIdleTimer = () => {
      clearTimeout(idleTimer);
      idleTimer = undefined;
    };
    sock.once("close", () => {
      clearHeadTimer();
      clearIdleTimer();
    });
    void (async () => {
      let peer: P;
      try {
        peer = await o.peer(sock);
      } catch (e) {
        o.log.debug({ front: o.name, remote: sock.remoteAddress, err: (e as Error).message }, "client certificate could not be judged; closing the connection");
        sockets.delete(sock);
        sock.destroy();
        return;
      }
      if (sock.destroyed) {
        sockets.delete(sock);
        return;
      }
      const secret = randomBytes(18).toString("base64url");
      const methods: string[] = [];
      const framer = new RequestFramer({ secret, headers: names, maxBodyBytes: o.maxBodyBytes, isIdentityHeader: o.isIdentityHeader, ...(keepAliveIdleMs > 0 ? { methods } : {}) });
      const responses = keepAliveIdleMs > 0 ? new ResponseTracker(methods) : undefined;
      const up = net.connect({ path: internalSocket });
      sockets.add(up);
      up.once("connect", () => {
        peers.set(secret, peer);
        sock.on("data", (chunk: Buffer) => {
          if (idleTimer !== undefined) clearIdleTimer();
          if (framer.done) return; // after a refusal: dropped, the connection closes after its answer
          const heads = framer.headsForwarded;
          const out = framer.feed(chunk);
          if (framer.headsForwarded !== heads || framer.done) clearHeadTimer();
          if (framer.readingHead && headTimer === undefined) armHeadTimer();
          if (framer.broken) {
            o.log.debug({ front: o.name, remote: sock.remoteAddress }, "malformed chunked request body; closing the connection");
            close();
            return;
          }
          if (out.length > 0 && !up.write(out)) sock.pause();
        });
        up.on("drain", () => sock.resume());
        up.pipe(sock);
        if (responses) {
          const follow = (chunk: Buffer) => {
            if (!responses.feed(chunk)) {
              if (!responses.following) up.off("data", follow);
              return;
            }
            if (framer.readingHead) return; // the next head has begun: the header deadline runs instead
            clearIdleTimer();
            idleTimer = setTimeout(() => {
              o.log.debug({ front: o.name, remote: sock.remoteAddress, idleMs: keepAliveIdleMs }, "kept-alive connection idle; closing it");
              close();
            }, keepAliveIdleMs);
          };
          up.on("data", follow);
        }
      });
      const close = () => {
        peers.delete(secret);
        sockets.delete(sock);
        sockets.delete(up);
        sock.destroy();
        up.destroy();
      };
      sock.once("close", close);
      up.once("close", close);
      sock.on("error", close);
      up.on("error", close);
    })();
  });
  // Bun leaves the socket open after a failed or timed-out handshake: closed here, or it would be held for ever.
  front.on("tlsClientError", (err, sock) => {
    o.log.debug({ front: o.name, err: err.message }, "TLS handshake failed");
    sock?.destroy();
  });
  front.on("connection", (sock: net.Socket) => {
    if (open >= maxConnections) {
      o.log.warn({ front: o.name, remote: sock.remoteAddress, maxConnections }, "too many open connections; closing a new one");
      sock.destroy();
      return;
    }
    open++;
    sockets.add(sock); // stop() ends a connection still in its handshake too
    sock.once("close", () => {
      open--;
      sockets.delete(sock);
    });
  });
  try {
    await new Promise<void>((resolve, reject) => {
      front.once("error", reject);
      front.listen(o.port, o.bindAddress, () => {
        front.off("error", reject);
        resolve();
      });
    });
  } catch (e) {
    await internal.stop(true);
    rmSync(dir, { recursive: true, force: true });
    throw e;
  }
  const addr = front.address();
  const port = typeof addr === "object" && addr ? addr.port : o.port;
  return {
    port,
    internalSocket,
    stop: async () => {
      await new Promise<void>((resolve) => {
        front.close(() => resolve());
        for (const s of sockets) s.destroy();
      });
      await internal.stop(true);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
