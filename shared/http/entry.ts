// Where a request enters any Bun.serve of ours (issue 17 case 8, issue 22 case 5). Bun hands a handler request
// shapes it never refused: CONNECT in authority form (`req.url` is "127.0.0.1:443"), a Host that makes the URL
// unparsable (`Host: a b`), malformed percent escapes. A handler's first `new URL(req.url)` then throws, and Bun's
// default (development mode unless NODE_ENV=production) answers with its error page: source lines, file paths and
// the working directory, plus a raw stack on stderr outside pino. Every listener therefore (1) refuses these
// shapes with its own envelope before the handler runs, (2) sets `development: false`, and (3) has an `error`
// handler that logs one structured line and answers the envelope (tests/unit/architecture/serve-guard.test.ts
// checks every call site).
import { type Log } from "../log/index.ts";

/** A server's own error body for a status and a short message (the `{code, message}` envelope, sandboxd's `{error}`). */
export type Envelope = (status: number, message: string) => Response;

/** The `{code, message}` envelope of the relay, the e2b surface and envd. */
export const codeMessageEnvelope: Envelope = (status, message) =>
  new Response(`${JSON.stringify({ code: status, message })}\n`, { status, headers: { "content-type": "application/json" } });

// A `%` not followed by two hex digits (RFC 3986 §2.1): not a URI, and decodeURIComponent throws on it.
const BAD_ESCAPE = /%(?![0-9A-Fa-f]{2})/;

export interface TargetProblem {
  status: 400 | 405;
  message: string;
}

/**
 * Why a request cannot be served, judged only from its method and target; undefined when a handler may parse it.
 * CONNECT is refused whatever its form: no server of ours tunnels, and a relayed CONNECT would reach a guest as
 * a request it cannot answer either.
 */
export function requestTargetProblem(method: string, url: string): TargetProblem | undefined {
  if (method === "CONNECT") return { status: 405, message: "CONNECT is not supported" };
  if (!URL.canParse(url)) return { status: 400, message: "the request target and Host do not form a valid URL" };
  const q = url.indexOf("?");
  if (BAD_ESCAPE.test(q < 0 ? url : url.slice(0, q))) return { status: 400, message: "malformed percent escape in the request path" };
  return undefined;
}

/** Wrap a Bun fetch handler so the shapes requestTargetProblem names get `envelope` instead of reaching it. */
export function guardRequests<S, R>(envelope: Envelope, handler: (req: Request, server: S) => R): (req: Request, server: S) => R | Response {
  return function guardedFetch(req, server) {
    const problem = requestTargetProblem(req.method, req.url);
    return problem ? envelope(problem.status, problem.message) : handler(req, server);
  };
}

/**
 * Bun.serve's `error` option: whatever a handler throws becomes one structured log line and a 500 envelope that
 * names nothing of the code (the line keeps the stack for the operator).
 */
export function uncaughtErrorHandler(log: Log, envelope: Envelope): (err: Error) => Response {
  return function answerUncaught(err) {
    log.error({ err }, "request handler threw; answered 500");
    return envelope(500, "internal error");
  };
}
