// A test peer process of the single-node cluster: its own process group, its output in a log file, killed with its
// group at stop() and, should the runner exit without stopping it, from an exit hook.
import { closeSync, openSync, readFileSync } from "node:fs";
import type { Subprocess } from "bun";

const live = new Set<number>();
process.on("exit", () => {
  for (const pid of live) killGroup(pid, "SIGKILL");
});

function killGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    try {
      process.kill(pid, signal);
    } catch {}
  }
}

export interface Daemon {
  name: string;
  proc: Subprocess;
  log: string;
  tail(lines?: number): string;
  /** SIGTERM, then SIGKILL after `graceMs`. */
  stop(graceMs?: number): Promise<void>;
}

export function startDaemon(name: string, argv: string[], logPath: string, env: Record<string, string> = {}): Daemon {
  const fd = openSync(logPath, "w");
  let proc: Subprocess;
  try {
    proc = Bun.spawn(argv, { stdio: ["ignore", fd, fd], detached: true, env: { ...process.env, ...env } });
  } finally {
    closeSync(fd);
  }
  live.add(proc.pid);
  const tail = (lines = 25) => {
    try {
      return readFileSync(logPath, "utf8").split("\n").slice(-lines).join("\n");
    } catch {
      return "(no log)";
    }
  };
  return {
    name,
    proc,
    log: logPath,
    tail,
    async stop(graceMs = 10_000) {
      if (proc.exitCode === null && proc.signalCode === null) {
        killGroup(proc.pid, "SIGTERM");
        const done = await Promise.race([proc.exited.then(() => true), Bun.sleep(graceMs).then(() => false)]);
        if (!done) killGroup(proc.pid, "SIGKILL");
        await proc.exited;
      }
      live.delete(proc.pid);
    },
  };
}

/** Throws with the daemon's log tail if it has exited. */
export function assertRunning(d: Daemon): void {
  if (d.proc.exitCode !== null || d.proc.signalCode !== null) {
    throw new Error(`${d.name} exited (${d.proc.exitCode ?? d.proc.signalCode}):\n${d.tail()}`);
  }
}
