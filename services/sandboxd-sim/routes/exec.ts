// sandboxd-sim — development substrate standing in for sandboxd (which needs KVM). Not product code.
//
// POST /v1/sandboxes/{id}/exec (sandboxd.md §5.6): the sandbox's own token only (no operator path); strict body
// `{argv, cwd?, env?, timeout_seconds?}` -> `{exit_code, stdout, stderr}`. Like any sandbox-token data-plane
// access it wakes a hibernated or archived sandbox, and it holds the idle clock while it runs. Runs in the sandbox's guest agent (guest/exec.ts): output past
// 8 MiB -> 413, past the timeout (default 60 s) -> 504; a node without guest agents answers 503 with
// `Retry-After: 1`, as sandboxd does while a guest is not ready. A failed sandbox -> 409.
import type { Hono } from "hono";
import { z } from "zod";
import { sandboxScoped } from "../auth.ts";
import { conflict, SimError } from "../errors.ts";
import type { SimNode } from "../node.ts";
import { execInGuest } from "../guest/index.ts";
import { bearer, decode, json, type SimEnv } from "./body.ts";

export const EXEC_MAX_OUTPUT_BYTES = 8 * 1024 * 1024;
export const EXEC_DEFAULT_TIMEOUT_SECONDS = 60;

const ExecRequest = z
  .object({
    argv: z.array(z.string()).min(1, "argv must name a program"),
    cwd: z.string().optional(),
    env: z.record(z.string(), z.string()).optional(),
    timeout_seconds: z.number().int().nonnegative().optional(),
  })
  .strict();

export function registerExec(app: Hono<SimEnv>, node: SimNode): void {
  app.post("/v1/sandboxes/:id/exec", async (c) => {
    const { sandbox } = sandboxScoped(node.tokens, bearer(c), node.table.get(c.req.param("id")), { operator: false });
    const req = await decode(c, ExecRequest);
    if (sandbox.state === "failed") throw conflict("sandbox failed");
    await node.wake(sandbox, { access: true });
    node.syncGuests(); // the guest resumes before the command starts
    const guest = node.guestHost?.get(sandbox.id);
    if (!guest) throw new SimError(503, "guest agent not available", { "retry-after": "1" });
    const timeout = req.timeout_seconds || EXEC_DEFAULT_TIMEOUT_SECONDS;
    let r;
    // A running exec holds the idle clock (idle.ts); its end counts as activity.
    const release = node.hold(sandbox);
    try {
      r = await execInGuest(guest, { argv: req.argv, cwd: req.cwd, env: req.env, timeoutMs: timeout * 1000, maxOutputBytes: EXEC_MAX_OUTPUT_BYTES });
    } catch (e) {
      throw new SimError(400, `exec: ${(e as Error).message}`);
    } finally {
      release();
    }
    if (r.kind === "timeout") throw new SimError(504, `exec timed out after ${timeout}s`);
    if (r.kind === "too-large") throw new SimError(413, "exec output exceeds 8 MiB");
    return json(c, 200, { exit_code: r.exitCode, stdout: r.stdout, stderr: r.stderr });
  });
}
