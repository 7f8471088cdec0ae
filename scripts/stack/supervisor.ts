// The local stack's process keeper: starts each binary as a child with its output in a log file, notices one
// that dies, and stops everything (SIGTERM, then SIGKILL after a grace period), so a Ctrl-C leaves no process
// behind. In-process parts (simulators, the test kube-apiserver) register a stop function. Parts stop together,
// not one after another: a binary draining an open stream (a client's command stream through the proxy) ends as
// soon as the simulators kill the sandbox behind it. Parts marked `last` (the kube-apiserver, which the daemons
// talk to while they shut down) stop after all the others.
import { closeSync, mkdirSync, openSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { Subprocess } from "bun";

const STOP_GRACE_MS = 5_000;

interface Part {
  name: string;
  stop: () => Promise<void>;
  last: boolean;
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
    this.parts.push({ name, stop: () => this.stopChild(name), last: false });
    void proc.exited.then((code) => {
      if (!this.stopping) this.onChildDied(name, code, tail(log));
    });
    return proc;
  }

  /** An in-process part (simulator, test cluster), stopped with the children or, with `last`, after them. */
  add(name: string, stop: () => Promise<void>, o: { last?: boolean } = {}): void {
    this.parts.push({ name, stop, last: o.last ?? false });
  }

  logOf(name: string): string | undefined {
    return this.children.get(name)?.log;
  }

  /** Stop every part: all but the `last` ones together, then those. Safe to call twice. */
  async stopAll(): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    const stop = async (p: Part) => {
      try {
        await p.stop();
      } catch (e) {
        process.stderr.write(`stack: stopping ${p.name}: ${(e as Error).message}\n`);
      }
    };
    await Promise.all(this.parts.filter((p) => !p.last).map(stop));
    await Promise.all(this.parts.filter((p) => p.last).map(stop));
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
