// The one way tests run a command to completion (kubectl, helm, openssl s_client, a binary's --help, a README
// example): stdout and stderr collected whole, the exit code, stdin closed at once unless given, and an optional
// deadline after which the command is killed. Never throws on a non-zero exit: the caller asserts on the result.

export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface RunOptions {
  cwd?: string;
  /** The whole environment (default: this process's). */
  env?: Record<string, string | undefined>;
  /** Written to the command's stdin, then closed. */
  stdin?: string;
  /** SIGKILL after this long; the result then carries whatever was written. */
  timeoutMs?: number;
}

export async function run(cmd: string[], o: RunOptions = {}): Promise<RunResult> {
  const proc = Bun.spawn(cmd, {
    ...(o.cwd ? { cwd: o.cwd } : {}),
    env: o.env ?? process.env,
    stdin: o.stdin === undefined ? "ignore" : new Blob([o.stdin]),
    stdout: "pipe",
    stderr: "pipe",
  });
  const timer = o.timeoutMs === undefined ? undefined : setTimeout(() => proc.kill("SIGKILL"), o.timeoutMs);
  try {
    const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    return { code, stdout, stderr };
  } finally {
    clearTimeout(timer);
  }
}

/** A result's stdout when it exited 0; otherwise throws naming `what` with the output's last lines. */
export function succeeded(what: string, r: RunResult): string {
  if (r.code !== 0) throw new Error(`${what}: exit ${r.code}: ${(r.stderr || r.stdout).trim().split("\n").slice(-8).join("\n")}`);
  return r.stdout;
}
