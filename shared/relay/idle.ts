// The relay listener's idle timeout (issue 17 case 10: keep-alive connections were never reaped with
// `idleTimeout: 0`). Bun's idleTimeout counts silence on the socket whatever the request is doing (measured on
// 1.4.5): it cuts a guest that is slow to send its response head, a quiet response stream (a pty, a watch) and a
// slow upload alike, but not an upgraded WebSocket (Bun's websocket handlers have their own idle timeout, with
// pings). So the timeout is switched off for the request's socket while the request is being answered and switched
// back on when the response ends: an idle keep-alive connection between requests is reaped, a long request is not.
// `server.timeout` only takes effect while the request is live, hence the re-arm in the body's last read.
import type { Server } from "bun";

/** Seconds a keep-alive connection may sit idle between requests: above the 60 s of common load balancers (AWS ALB,
 * ingress-nginx upstream keep-alive), so the proxy is not the side that closes a connection they are reusing. */
export const RELAY_IDLE_TIMEOUT_S = 90;

/** Switch the idle timeout off for `req` while it is answered. */
export function holdIdleTimeout(server: Server<unknown>, req: Request): void {
  try {
    server.timeout(req, 0);
  } catch {
    // An HTTP/2 stream has no socket of its own to time out; its connection's idle rules stay Bun's.
  }
}

/**
 * `res` with the idle timeout of `req`'s socket set back to `seconds` when its body ends (at once for a body-less
 * or non-streaming response). The body is read through unchanged; the wrapper pulls only when Bun pulls, so the
 * guest's backpressure is untouched. It also keeps a guest's broken body quiet: the relay errors its stream (the
 * client's download fails), and Bun 1.4.5 prints a raw stack to stderr for a response stream that is errored before
 * Bun reads it, but nothing for a pull that rejects, which is how the error reaches Bun through this wrapper
 * (measured: tests/integration/envelopes/body-attacks.test.ts).
 */
export function rearmIdleTimeout(server: Server<unknown>, req: Request, seconds: number, res: Response): Response {
  const rearm = () => {
    try {
      server.timeout(req, seconds);
    } catch {
      // The request is already gone (client left): nothing to re-arm.
    }
  };
  const body = res.body;
  if (body === null) {
    rearm();
    return res;
  }
  const reader = body.getReader();
  const wrapped = new ReadableStream<Uint8Array>(
    {
      async pull(ctrl) {
        const { done, value } = await reader.read();
        if (done) {
          rearm();
          ctrl.close();
        } else ctrl.enqueue(value);
      },
      cancel(reason) {
        return reader.cancel(reason);
      },
    },
    { highWaterMark: 0 },
  );
  return new Response(wrapped, { status: res.status, statusText: res.statusText, headers: res.headers });
}
