// sandboxd-sim guest — development substrate, not product code. See README.md in this folder.
//
// sandboxd's one-shot exec (`POST /v1/sandboxes/{id}/exec`, routes/exec.ts) inside a guest: run argv to
// completion in the sandbox, collecting stdout and stderr. Past the deadline, or past the output cap, the
// process group is killed and the caller learns which.
import type { GuestSandbox } from "./sandbox.ts";

export interface ExecInput {
  argv: string[];
  /** Guest path; default the sandbox's working directory. */
  cwd?: string;
  env?: Record<string, string>;
  timeoutMs: number;
  maxOutputBytes: number;
}

export type ExecOutcome =
  | { kind: "done"; exitCode: number; stdout: string; stderr: string }
  | { kind: "timeout" }
  | { kind: "too-large" };

export async function execInGuest(sb: GuestSandbox, o: ExecInput): Promise<ExecOutcome> {
  await sb.ready;
  const out: Uint8Array[] = [];
  const err: Uint8Array[] = [];
  let size = 0;
  let verdict: "timeout" | "too-large" | undefined;
  let resolveEnd!: (code: number) => void;
  const ended = new Promise<number>((r) => (resolveEnd = r));
  const proc = await sb.processes.start(
    { cmd: o.argv[0]!, args: o.argv.slice(1), envs: o.env ?? {}, cwd: o.cwd },
    { stdin: false, ...sb.launch(o.cwd, undefined, o.env ?? {}) },
    (e) => {
      if (e.kind === "end") return resolveEnd(e.end.exitCode);
      if (e.kind !== "data" || verdict) return;
      size += e.data.byteLength;
      if (size > o.maxOutputBytes) {
        verdict = "too-large";
        kill();
        return;
      }
      (e.stream === "stderr" ? err : out).push(e.data);
    },
  );
  function kill(): void {
    try {
      process.kill(-proc.pid, "SIGKILL");
    } catch {
      // already gone
    }
  }
  const timer = setTimeout(() => {
    verdict ??= "timeout";
    kill();
  }, o.timeoutMs);
  const exitCode = await ended;
  clearTimeout(timer);
  if (verdict) return { kind: verdict };
  const text = (parts: Uint8Array[]) => Buffer.concat(parts).toString("utf8");
  return { kind: "done", exitCode, stdout: text(out), stderr: text(err) };
}
