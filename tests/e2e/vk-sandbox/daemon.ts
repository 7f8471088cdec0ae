// Runs vk-sandbox as a separate process, the way systemd does: the compiled dist/vk-sandbox when it exists (the
// issue asks for the binary), else `bun services/vk-sandbox/main.ts`. Output goes to a file the test can read.
import { closeSync, existsSync, mkdtempSync, openSync, readdirSync, readFileSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Subprocess } from "bun";
import { GiveUp, waitFor } from "#tests/support/wait.ts";

const root = join(import.meta.dir, "..", "..", "..");
export const DIST_BINARY = join(root, "dist", "vk-sandbox");

/** Newest modification time of the sources the binary is compiled from. */
function newestSource(dir: string): number {
  let newest = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) newest = Math.max(newest, newestSource(p));
    else if (e.name.endsWith(".ts")) newest = Math.max(newest, statSync(p).mtimeMs);
  }
  return newest;
}

/**
 * The compiled binary when it is at least as new as every source it is built from (so a stale dist/ never
 * passes for the code under test), else the source through bun. VK_E2E_SOURCE=1 forces the source.
 */
export function daemonCommand(): string[] {
  const fresh = () =>
    statSync(DIST_BINARY).mtimeMs >= Math.max(newestSource(join(root, "services", "vk-sandbox")), newestSource(join(root, "shared")));
  if (process.env.VK_E2E_SOURCE !== "1" && existsSync(DIST_BINARY) && fresh()) return [DIST_BINARY];
  // VK_E2E_BUN_ARGS adds runtime flags (e.g. "--cpu-prof --cpu-prof-md --cpu-prof-dir=/tmp/prof") when profiling.
  const extra = process.env.VK_E2E_BUN_ARGS?.split(" ").filter(Boolean) ?? [];
  return [process.execPath, ...extra, join(root, "services", "vk-sandbox", "main.ts")];
}

export interface DaemonOptions {
  args?: string[];
  env?: Record<string, string | undefined>;
  /** Inherit nothing from the test's environment but PATH/HOME (so a stray KUBECONFIG cannot leak in). */
  cleanEnv?: boolean;
  /**
   * Run the daemon with a private tmpfs over /var/lib (a mount namespace of its own; the process keeps its pid,
   * so the test reads its files under /proc/<pid>/root). For checks of the default state path that must never
   * write the real /var/lib/vk-sandbox.
   */
  privateVarLib?: boolean;
}

export class Daemon {
  readonly proc: Subprocess;
  readonly logPath: string;
  /** The kubelet API port, when the caller chose one. */
  port = 0;
  private static live = new Set<Daemon>();

  private constructor(proc: Subprocess, logPath: string) {
    this.proc = proc;
    this.logPath = logPath;
    Daemon.live.add(this);
    void proc.exited.then(() => Daemon.live.delete(this));
  }

  static start(o: DaemonOptions = {}): Daemon {
    const dir = mkdtempSync(join(tmpdir(), "vk-e2e-"));
    const logPath = join(dir, "daemon.log");
    const fd = openSync(logPath, "w");
    const base: Record<string, string | undefined> = o.cleanEnv === false ? { ...process.env } : { PATH: process.env.PATH, HOME: process.env.HOME };
    try {
      const wrap = o.privateVarLib
        ? ["unshare", "--mount", "--propagation", "private", "sh", "-c", 'mount -t tmpfs vk-e2e /var/lib && exec "$@"', "sh"]
        : [];
      const proc = Bun.spawn([...wrap, ...daemonCommand(), ...(o.args ?? [])], {
        env: { ...base, ...o.env } as Record<string, string>,
        stdio: ["ignore", fd, fd],
      });
      return new Daemon(proc, logPath);
    } finally {
      closeSync(fd);
    }
  }

  log(): string {
    try {
      return readFileSync(this.logPath, "utf8");
    } catch {
      return "";
    }
  }

  /** Waits until the output matches, failing early if the process exits first. */
  async waitForLog(re: RegExp, timeoutMs = 30_000): Promise<void> {
    await waitFor(String(re), () => {
      if (re.test(this.log())) return true;
      if (this.proc.exitCode !== null || this.proc.signalCode !== null) {
        throw new GiveUp(`daemon exited (${this.proc.exitCode ?? this.proc.signalCode}) before ${re}:\n${this.tail()}`);
      }
      return false;
    }, timeoutMs, 25).catch((e: unknown) => {
      throw e instanceof GiveUp ? e : new Error(`timed out waiting for ${re}:\n${this.tail()}`);
    });
  }

  tail(lines = 40): string {
    return this.log().split("\n").slice(-lines).join("\n");
  }

  async kill(signal: "SIGKILL" | "SIGTERM" | "SIGINT"): Promise<number | null> {
    this.proc.kill(signal);
    await this.proc.exited;
    return this.proc.exitCode;
  }

  /** The exit code; fails if the process is still running after the timeout. */
  async exitCode(timeoutMs = 30_000): Promise<number> {
    const t = setTimeout(() => this.proc.kill("SIGKILL"), timeoutMs);
    try {
      await this.proc.exited;
    } finally {
      clearTimeout(t);
    }
    return this.proc.exitCode ?? -1;
  }

  static async killAll(): Promise<void> {
    await Promise.all([...Daemon.live].map((d) => d.kill("SIGKILL")));
  }
}

process.on("exit", () => {
  for (const d of (Daemon as unknown as { live: Set<Daemon> }).live) d.proc.kill("SIGKILL");
});
