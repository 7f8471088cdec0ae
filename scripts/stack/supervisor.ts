// The local stack's process keeper: starts each binary as a child with its output in a log file, notices one
// that dies, and stops everything in reverse order (SIGTERM, then SIGKILL after a grace period), so a Ctrl-C
// leaves no process behind. In-process parts (simulators, the test kube-apiserver) register a stop function.
import { closeSync, mkdirSync, openSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { Subprocess } from "bun";

const STOP_GRACE_MS = 5_000;

interface Part {
  name: string;
  stop: () => Promise<void>;
}

export class Supervisor {
  private readonly parts: Part[] = [];
  private readonly children = new Map<string, { proc: Subprocess; log: string }>();
  private stopping = false;
  /** Set when a child exits on its own: the stack cannot serve without it. */
  onChildDied: (name: string, code: number | null, logTail: string) => void = () => {};

  constructor(readonly logDir: string) {
    mkdirSync(logDir, { recursive: true });
  }

  /** Start a child; stdout and stderr go to `<logDir>/<name>.log` (overwritten). */
  spawn(name: string, argv: string[], env: Record<string, string | undefined> = {}): Subprocess {
    const log = join(this.logDir, `${name}.log`);
    const fd = openSync(log, "w");
    const proc = Bun.spawn(argv, { env: { ...process.env, ...env }, stdio: ["ignore", fd, fd] });
    closeSync(fd);
    this.children.set(name, { proc, log });
    this.parts.push({ name, stop: () => this.stopChild(name) });
    void proc.exited.then((code) => {
      if (!this.stopping) this.onChildDied(name, code, tail(log));
    });
    return proc;
  }

  /** An in-process part (simulator, test cluster): stopped in reverse order with the children. */
  add(name: string, stop: () => Promise<void>): void {
    this.parts.push({ name, stop });
  }

  logOf(name: string): string | undefined {
    return this.children.get(name)?.log;
  }

  /** Stop every part, newest first. Safe to call twice. */
  async stopAll(): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    for (const p of [...this.parts].reverse()) {
      try {
        await p.stop();
      } catch (e) {
        process.stderr.write(`stack: stopping ${p.name}: ${(e as Error).message}\n`);
      }
    }
  }

  private async stopChild(name: string): Promise<void> {
    const c = this.children.get(name);
    if (!c || c.proc.exitCode !== null || c.proc.signalCode !== null) return;
    c.proc.kill("SIGTERM");
    const timer = setTimeout(() => c.proc.kill("SIGKILL"), STOP_GRACE_MS);
    await c.proc.exited;
    clearTimeout(timer);
  }
}

/** The last lines of a log file, for the message when a part fails. */
export function tail(path: string, lines = 15): string {
  try {
    return readFileSync(path, "utf8").trimEnd().split("\n").slice(-lines).join("\n");
  } catch {
    return "";
  }
}

/** Poll until `probe` answers true, or fail naming what did not become ready. */
export async function waitFor(what: string, probe: () => Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    if (await probe().catch(() => false)) return;
    if (Date.now() > end) throw new Error(`${what} did not become ready within ${timeoutMs / 1000} s`);
    await Bun.sleep(100);
  }
}

/** GET url answers one of `statuses`. */
export async function answers(url: string, statuses: number[], init: BunFetchRequestInit = {}): Promise<boolean> {
  const r = await fetch(url, { ...init, signal: AbortSignal.timeout(2_000) });
  await r.body?.cancel();
  return statuses.includes(r.status);
}
