// The relay listener's idle timeout (issue 17 case 10: keep-alive connections were never reaped with
// `idleTimeout: 0`). Bun's idleTimeout counts silence on the socket whatever the request is doing (measured on
// 1.4.5): it cuts a guest that is slow to send its response head, a quiet response stream (a pty, a watch) and a
// slow upload alike, but not an upgraded WebSocket (Bun's websocket handlers have their own idle timeout, with
// pings). So the timeout is switched off for the request's socket while the request is being answered and switched
// back on when the response ends: an idle keep-alive connection between requests is reaped, a long request is not.
// `server.timeout` only takes effect while the request is live, hence the re-arm when the client has read the
// body's last byte, which the guest leg's own stream reports (GuestRequest.bodyEnd): no second stream per response
// (docs/performance.md "The cost of issue 17's and 22's bounds on the honest path").
import type { Server } from "bun";
import type { BodyEndListener } from "./guest.ts";

/** Seconds a keep-alive connection may sit idle between requests: above the 60 s of common load balancers (AWS ALB,
 * ingress-nginx upstream keep-alive), so the proxy is not the side that closes a connection they are reusing. */
export const RELAY_IDLE_TIMEOUT_S = 90;

/** One request's hold on its socket's idle timeout: off from construction until rearm(). */
export class RequestIdle implements BodyEndListener {
  /** Set by the relay when it hands on a guest body: that body's end re-arms, not the caller. */
  awaitingBody = false;

  constructor(
    private readonly server: Server<unknown>,
    private readonly req: Request,
    private readonly seconds: number,
  ) {
    try {
      server.timeout(req, 0);
    } catch {
      // An HTTP/2 stream has no socket of its own to time out; its connection's idle rules stay Bun's.
    }
  }

  /** The response is complete (or has no streamed body): the idle timeout counts again. */
  rearm(): void {
    try {
      this.server.timeout(this.req, this.seconds);
    } catch {
      // The request is already gone (client left), or an HTTP/2 stream: nothing to re-arm.
    }
  }

  bodyEnded(): void {
    this.rearm();
  }
}
