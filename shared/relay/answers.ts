// The data plane's answers that the stock SDKs branch on (docs/e2b.md "Errors as the SDKs see them"). Their status
// and words follow what e2b cloud's proxy answers, because the SDKs read them:
// - a sandbox nobody holds (unknown, killed, timed out, another tenant's): 502 whose message says "was not found".
//   JS: commands -> SandboxNotFoundError, envd REST -> TimeoutError, isRunning() -> false (it reads only the 502).
//   Python 2.63: SandboxNotRunningException only when the message contains "was not found"; any other 502 text is
//   SandboxUnreachableException ("state unknown"), which is what our own failures (node unreadable) should say.
// - a paused sandbox a passive (signed-URL) relay may not wake: 409 "sandbox is paused", as e2b cloud's proxy
//   answers a paused sandbox it will not resume (its sandbox_paused error page is a 409).
// - a relay cap: 429 with Retry-After (both SDKs' rate-limit error; the JS SDK retries REST calls only with it).
// Bodies never carry the id, a node name, an address or a token.

/** The `{code, message}` envelope every relay failure answers with (newline-terminated, as before). */
export function relayError(status: number, message: string, headers?: Record<string, string>): Response {
  return new Response(`${JSON.stringify({ code: status, message })}\n`, { status, headers: { "content-type": "application/json", ...headers } });
}

/** The words both SDKs (and e2b cloud's proxy) use for a sandbox that is not there: Python matches "was not found". */
export const SANDBOX_NOT_FOUND_MESSAGE = "sandbox was not found";
export const SANDBOX_PAUSED_MESSAGE = "sandbox is paused";
/**
 * A sandbox that was asleep and whose node could not wake it (the wake failed, the node could not be dialled): a 502
 * that names the wake, so the caller knows a retry (or a connect) is the remedy, not a new sandbox.
 * Python reads it as SandboxUnreachableException ("state unknown"); not "was not found": the sandbox is there.
 */
export const SANDBOX_WAKE_FAILED_MESSAGE = "sandbox was asleep and its node could not wake it; retry later";
/**
 * A sandbox that was asleep and whose node had not woken it within --wake-timeout: a 504 (the SDKs' timeout, never
 * "not found": the JS SDK's isRunning() reads a 502 as gone). The node's wake goes on; a later request is served.
 */
export function sandboxWakeTimedOutMessage(timeoutMs: number): string {
  const bound = timeoutMs % 1000 === 0 ? `${timeoutMs / 1000}s` : `${timeoutMs}ms`;
  return `sandbox was asleep and did not wake in time (within ${bound}); retry later`;
}

/**
 * The wake timeout as the request's protocol reads it. Plain HTTP (envd REST, isRunning): the 504 envelope. A Connect
 * request (commands, filesystem RPCs) reads an HTTP status only as a Connect code, and connect-es maps 502, 503 and 504
 * alike to `unavailable`, which the JS SDK's commands.run turns into SandboxNotFoundError ("Sandbox is probably not
 * running anymore"): so a Connect request gets Connect's own error, `deadline_exceeded` with the same words (the SDKs'
 * TimeoutError) — a unary call in a 504 JSON body, a stream as its end-of-stream message (Connect streams carry their
 * error in a 200, an HTTP error status is read as unavailable again).
 */
export function wakeTimedOutAnswer(req: Request, timeoutMs: number): Response {
  const message = sandboxWakeTimedOutMessage(timeoutMs);
  const type = req.headers.get("content-type")?.toLowerCase() ?? "";
  if (type.startsWith("application/connect+")) {
    const json = type.startsWith("application/connect+json");
    // End-of-stream frame: flag 0x02, big-endian length, a JSON body (also for a proto stream: Connect's end message is JSON).
    const body = Buffer.from(JSON.stringify({ error: { code: "deadline_exceeded", message } }));
    const frame = Buffer.alloc(5 + body.length);
    frame[0] = 0x02;
    frame.writeUInt32BE(body.length, 1);
    body.copy(frame, 5);
    return new Response(frame, { status: 200, headers: { "content-type": json ? "application/connect+json" : type.split(";")[0]! } });
  }
  if (req.headers.has("connect-protocol-version")) {
    return new Response(`${JSON.stringify({ code: "deadline_exceeded", message })}\n`, { status: 504, headers: { "content-type": "application/json" } });
  }
  return relayError(504, message);
}
/** Our side could not tell (node unreadable, no address): the SDKs' "state unknown" answer, not "gone". */
export const SANDBOX_UNAVAILABLE_MESSAGE = "sandbox unavailable";
/** Seconds a refused relay is told to wait: a slot frees as soon as one relay closes. */
export const RELAY_RETRY_AFTER_SECONDS = 1;

export const sandboxNotFound = (): Response => relayError(502, SANDBOX_NOT_FOUND_MESSAGE);
export const sandboxUnavailable = (): Response => relayError(502, SANDBOX_UNAVAILABLE_MESSAGE);
export const sandboxPaused = (): Response => relayError(409, SANDBOX_PAUSED_MESSAGE);
export const rateLimited = (status: 429 | 503, message: string): Response =>
  relayError(status, message, { "retry-after": String(RELAY_RETRY_AFTER_SECONDS) });

/** Which owner-resolution failures read as "not found": the caller's doing, or unprovable by design (the probe budget). */
export function unresolvedAnswer(reason: "unknown" | "node-read-failed" | "probe-budget" | "no-address"): Response {
  return reason === "unknown" || reason === "probe-budget" ? sandboxNotFound() : sandboxUnavailable();
}
