// One command in a sandbox through envd's `process.Process/Start` (Connect protocol, JSON codec, server stream),
// over the node's ports relay like the e2b surface's /init (shared/e2b/envd.ts): the request is one enveloped JSON
// message, the reply a run of envelopes (start, data, end events) closed by an end-of-stream envelope. Bounded:
// the reply is at most 64 KiB and the exchange has a deadline. Only what the canary needs: the exit code.
import { exchangeOverTunnel } from "#shared/relay/index.ts";
import { ENVD_PORT, type EnvdTarget } from "#shared/e2b/index.ts";

export const COMMAND_TIMEOUT_MS = 10_000;
const REPLY_MAX_BYTES = 64 * 1024;
const END_STREAM = 0x02;

export interface CommandOutcome {
  exitCode: number;
}

/** Runs `sh -c <script>` as user `user` with the sandbox's envd access token; throws with the reason when it fails. */
export async function runCommand(t: EnvdTarget, accessToken: string, script: string, user = "user", signal?: AbortSignal): Promise<CommandOutcome> {
  const message = JSON.stringify({ process: { cmd: "/bin/sh", args: ["-c", script] } });
  // The relay's small exchange carries a string body; an envelope whose 4-byte length stays below 0x80 per byte is
  // plain ASCII, so the message is kept under 128 bytes rather than teaching the relay binary bodies.
  if (message.length >= 0x80) throw new Error(`canary command too long (${message.length} bytes; at most 127)`);
  const envelope = String.fromCharCode(0, 0, 0, 0, message.length) + message;
  const reply = await exchangeOverTunnel(
    { address: t.address, claimId: t.claimId, port: ENVD_PORT, token: t.rootToken },
    {
      method: "POST",
      path: "/process.Process/Start",
      headers: {
        host: "envd",
        "content-type": "application/connect+json",
        "connect-protocol-version": "1",
        "connect-timeout-ms": String(COMMAND_TIMEOUT_MS),
        "x-access-token": accessToken,
        authorization: `Basic ${Buffer.from(`${user}:`).toString("base64")}`,
      },
      body: envelope,
      timeoutMs: COMMAND_TIMEOUT_MS,
      maxBytes: REPLY_MAX_BYTES,
    },
    signal ? { signal } : {},
  );
  if (reply.status !== 200) throw new Error(`envd process.Start answered ${reply.status}`);
  let exitCode: number | undefined;
  for (const { flags, json } of envelopes(reply.body)) {
    if (flags & END_STREAM) {
      const err = (json as { error?: { code?: string; message?: string } }).error;
      if (err) throw new Error(`envd process.Start failed: ${err.code ?? "unknown"}: ${err.message ?? ""}`.trim());
      continue;
    }
    const end = (json as { event?: { end?: { exitCode?: number; exited?: boolean; status?: string } } }).event?.end;
    if (end) exitCode = end.exitCode ?? 0;
  }
  if (exitCode === undefined) throw new Error("envd process.Start stream ended without an end event");
  return { exitCode };
}

function* envelopes(buf: Buffer): Generator<{ flags: number; json: unknown }> {
  let at = 0;
  while (at + 5 <= buf.length) {
    const flags = buf[at]!;
    const len = buf.readUInt32BE(at + 1);
    if (at + 5 + len > buf.length) throw new Error("envd process.Start reply cut short");
    const text = buf.subarray(at + 5, at + 5 + len).toString("utf8");
    at += 5 + len;
    try {
      yield { flags, json: text ? JSON.parse(text) : {} };
    } catch {
      throw new Error("envd process.Start reply is not JSON");
    }
  }
}
