// The build executor's calls to the build sandbox's envd (docs/e2b.md §6.2), over the node's ports relay opened with
// the claim token, every guest byte through the relay's framing parser (shared/relay). The build guest runs tenant
// steps and is as untrusted as any other: each Connect envelope is bounded, output is split into log lines with a
// partial line flushed at 64 KiB, a captured value is bounded, and every call ends with the build's signal. Output
// nobody keeps (past the build's log cap) is neither decoded nor split, and is read at a bounded pace (OutputPacer):
// a step printing without end costs this thread a bounded share, whatever the guest sends.
import { forwardHttp1Raw, openTunnel } from "../../relay/index.ts";
import { ENVD_PORT } from "../envd.ts";
import { realClock } from "../../clock/index.ts";
import { DISCARD_BURST_BYTES, DISCARD_BYTES_PER_SECOND, DISCARD_ENVELOPE_COST, DISCARD_SKIP_OVER, EnvdCallError, EnvelopeReader, OutputPacer } from "./guest-output.ts";

export { EnvdCallError, EnvelopeReader, LineSplitter, MAX_ENVELOPE_BYTES, MAX_LINE_BYTES } from "./guest-output.ts";

/** Largest error body read from envd. */
const MAX_ERROR_BYTES = 64 * 1024;

export interface BuildTarget {
  address: string;
  claimId: string;
  /** The claim token: the relay is active for the build. */
  token: string;
  /**
   * The build's own envd access token (service.ts sets it at claim): every call carries it, and so does every
   * template the build promotes (a cache entry, the result), so a clone never answers a caller without a token.
   */
  accessToken: string;
}

async function request(t: BuildTarget, r: { method: string; path: string; headers: Record<string, string>; body: ReadableStream<Uint8Array> | null; signal: AbortSignal }): Promise<Response> {
  const sock = await openTunnel({ address: t.address, claimId: t.claimId, port: ENVD_PORT, token: t.token }, { signal: r.signal });
  return forwardHttp1Raw(sock, {
    method: r.method,
    path: r.path,
    authority: "envd",
    headers: { ...r.headers, "x-access-token": t.accessToken },
    body: r.body,
    onBytesIn: () => undefined,
    onBytesOut: () => undefined,
    signal: r.signal,
  });
}

/** Read at most `max` bytes of a body (the rest is cancelled). */
async function readBounded(body: ReadableStream<Uint8Array> | null, max: number): Promise<string> {
  if (!body) return "";
  const reader = body.getReader();
  const parts: Uint8Array[] = [];
  let n = 0;
  try {
    while (n < max) {
      const { done, value } = await reader.read();
      if (done) break;
      parts.push(value);
      n += value.byteLength;
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
  return Buffer.concat(parts).subarray(0, max).toString("utf8");
}

const basic = (user: string) => `Basic ${Buffer.from(`${user}:`).toString("base64")}`;

function envelope(msg: unknown): Uint8Array {
  const json = Buffer.from(JSON.stringify(msg));
  const out = Buffer.alloc(5 + json.length);
  out.writeUInt8(0, 0);
  out.writeUInt32BE(json.length, 1);
  json.copy(out, 5);
  return out;
}

export interface ProcessSpec {
  cmd: string;
  args: string[];
  user: string;
  cwd?: string;
  envs: Record<string, string>;
  /** The command is killed by envd once this passes. */
  timeoutMs: number;
}

export interface ProcessResult {
  exitCode: number;
  /** envd's status text (`exit status 3`, `signal: killed`). */
  status: string;
}

type Event = { start?: { pid?: number }; data?: { stdout?: string; stderr?: string; pty?: string }; end?: { exitCode?: number; exited?: boolean; status?: string; error?: string } };

/**
 * envd `process.Process/Start` as a Connect server stream. `onOutput` receives each chunk of stdout/stderr;
 * `detachAfterStart` returns as soon as the process started (it keeps running: startCmd). Throws EnvdCallError
 * on protocol errors and envd's own errors. While `wantsOutput` answers false, output is dropped undecoded and
 * the stream is read at the discard pace (guest-output.ts OutputPacer) until the process's end event.
 */
export async function startProcess(
  t: BuildTarget,
  p: ProcessSpec,
  o: { signal: AbortSignal; onOutput?: (stream: "stdout" | "stderr", bytes: Uint8Array) => void; wantsOutput?: () => boolean; detachAfterStart?: boolean },
): Promise<ProcessResult & { pid?: number }> {
  // An abort listener added to an already aborted signal never fires: the command would run on unstopped.
  if (o.signal.aborted) throw new EnvdCallError("aborted");
  const ctl = new AbortController();
  const stop = () => ctl.abort();
  o.signal.addEventListener("abort", stop, { once: true });
  try {
    const body = envelope({ process: { cmd: p.cmd, args: p.args, envs: p.envs, ...(p.cwd ? { cwd: p.cwd } : {}) }, stdin: false });
    const res = await request(t, {
      method: "POST",
      path: "/process.Process/Start",
      headers: {
        "content-type": "application/connect+json",
        "connect-protocol-version": "1",
        // A background command (startCmd) outlives its stream: no deadline for envd to enforce on it.
        ...(o.detachAfterStart ? {} : { "connect-timeout-ms": String(Math.max(1, Math.floor(p.timeoutMs))) }),
        authorization: basic(p.user),
        "content-length": String(body.byteLength),
      },
      body: new Blob([body as Uint8Array<ArrayBuffer>]).stream(),
      signal: ctl.signal,
    });
    if (res.status !== 200) throw new EnvdCallError(`envd answered ${res.status} to a process start: ${(await readBounded(res.body, MAX_ERROR_BYTES)).slice(0, 500)}`);
    const reader = new EnvelopeReader();
    const stream = res.body!.getReader();
    const wanted = () => o.onOutput !== undefined && (o.wantsOutput?.() ?? true);
    let pacer: OutputPacer | undefined;
    let pid: number | undefined;
    for (;;) {
      const { done, value } = await stream.read();
      if (done) break;
      const discarding = !wanted();
      const messages = reader.feed(value, discarding ? DISCARD_SKIP_OVER : undefined);
      if (discarding) {
        pacer ??= new OutputPacer(DISCARD_BYTES_PER_SECOND, DISCARD_BURST_BYTES);
        const wait = pacer.spend(value.byteLength + messages.length * DISCARD_ENVELOPE_COST);
        if (wait > 0) await realClock.sleep(wait, ctl.signal);
      }
      for (const [flags, text] of messages) {
        let msg: { event?: Event; error?: { code?: string; message?: string } };
        try {
          msg = JSON.parse(text) as typeof msg;
        } catch {
          throw new EnvdCallError("envd sent a message that is not JSON");
        }
        if (flags & 0x02) {
          if (msg.error) throw new EnvdCallError(`envd: ${String(msg.error.code ?? "error")}: ${String(msg.error.message ?? "").slice(0, 500)}`);
          throw new EnvdCallError("the process stream ended before the process did");
        }
        const ev = msg.event;
        if (!ev) continue;
        if (ev.start) {
          pid = typeof ev.start.pid === "number" ? ev.start.pid : undefined;
          if (o.detachAfterStart) return { exitCode: 0, status: "started", ...(pid !== undefined ? { pid } : {}) };
        }
        if (ev.data && o.onOutput && wanted()) {
          if (typeof ev.data.stdout === "string") o.onOutput("stdout", Buffer.from(ev.data.stdout, "base64"));
          if (typeof ev.data.stderr === "string") o.onOutput("stderr", Buffer.from(ev.data.stderr, "base64"));
          if (typeof ev.data.pty === "string") o.onOutput("stdout", Buffer.from(ev.data.pty, "base64"));
        }
        if (ev.end) {
          const exitCode = typeof ev.end.exitCode === "number" ? ev.end.exitCode : ev.end.exited === false ? -1 : 0;
          return { exitCode, status: String(ev.end.status ?? ev.end.error ?? "").slice(0, 200), ...(pid !== undefined ? { pid } : {}) };
        }
      }
    }
    if (o.signal.aborted) throw new EnvdCallError("aborted");
    throw new EnvdCallError("the process stream ended before the process did");
  } finally {
    o.signal.removeEventListener("abort", stop);
    ctl.abort();
  }
}

/** Run a command and return its stdout (at most `max` bytes; more fails the call). */
export async function captureOutput(t: BuildTarget, p: ProcessSpec, max: number, signal: AbortSignal): Promise<{ result: ProcessResult; stdout: string; stderr: string }> {
  const out: Uint8Array[] = [];
  const err: Uint8Array[] = [];
  let n = 0;
  const result = await startProcess(t, p, {
    signal,
    onOutput: (s, b) => {
      n += b.byteLength;
      if (n > max) throw new EnvdCallError(`command output over ${max} bytes`);
      (s === "stdout" ? out : err).push(b);
    },
  });
  return { result, stdout: Buffer.concat(out).toString("utf8"), stderr: Buffer.concat(err).toString("utf8") };
}

/** envd `POST /files` (octet-stream) of `size` bytes to `path`, owned by `user`. */
export async function uploadFile(t: BuildTarget, path: string, user: string, body: ReadableStream<Uint8Array>, size: number, signal: AbortSignal): Promise<void> {
  const q = new URLSearchParams({ path, username: user });
  const res = await request(t, {
    method: "POST",
    path: `/files?${q}`,
    headers: { "content-type": "application/octet-stream", "content-length": String(size), authorization: basic(user) },
    body,
    signal,
  });
  const text = await readBounded(res.body, MAX_ERROR_BYTES);
  if (res.status !== 200 && res.status !== 201 && res.status !== 204) throw new EnvdCallError(`envd answered ${res.status} to the upload: ${text.slice(0, 300)}`);
}
