// sandboxd-sim — development substrate standing in for sandboxd (which needs KVM). Not product code.
//
// Handlers only throw; one onError in routes/index.ts turns a SimError into sandboxd's `{"error":"…"}` body.

export class SimError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

export const badRequest = (msg: string) => new SimError(400, msg);
export const invalidBody = (detail?: string) => new SimError(400, detail ? `invalid request body: ${detail}` : "invalid request body");
export const unknownSandbox = () => new SimError(404, "unknown sandbox");
export const conflict = (msg: string) => new SimError(409, msg);

/** sandboxd's error body for an answer written outside Hono (the listener's own refusals, the admin listener). */
export const simErrorResponse = (status: number, message: string): Response =>
  new Response(JSON.stringify({ error: message }), { status, headers: { "content-type": "application/json" } });
