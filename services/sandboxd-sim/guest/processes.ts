// sandboxd-sim guest — development substrate, not product code. See README.md in this folder.
//
// The sandbox's processes: plain host child processes, each the leader of its own process group so a signal
// reaches everything it started (a shell's children included). Hibernate stops every group (SIGSTOP), wake
// resumes them (SIGCONT), destroy kills them (SIGKILL). Events (start, output, end) fan out to every stream
// attached to the process: the Start stream that spawned it and any Connect streams.
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, statSync } from "node:fs";

export interface ProcessConfig {
  cmd: string;
  args: string[];
  envs: Record<string, string>;
  /** Guest path, as the caller sent it (List echoes it). */
  cwd?: string;
}

export interface EndInfo {
  exitCode: number;
  exited: boolean;
  status: string;
  error?: string;
}

export type ProcEvent =
  | { kind: "start"; pid: number }
  | { kind: "data"; stream: "stdout" | "stderr" | "pty"; data: Uint8Array }
  | { kind: "end"; end: EndInfo };

export type Selector = { pid: number } | { tag: string };

/** Thrown for a selector that names no running process (the services answer NotFound). */
export class NoSuchProcess extends Error {}
/** Thrown when a request is valid but the process cannot take it (stdin closed, spawn failed…). */
export class ProcessRefused extends Error {}

// Go's os.ProcessState.String() wording, which the SDK shows in errors.
const SIGNAL_NAMES: Record<string, string> = { SIGKILL: "killed", SIGTERM: "terminated", SIGINT: "interrupt", SIGHUP: "hangup" };

export class GuestProcess {
  private readonly subs = new Set<(e: ProcEvent) => void>();
  ended: EndInfo | undefined;

  constructor(
    readonly pid: number,
    readonly config: ProcessConfig,
    readonly tag: string | undefined,
    readonly pty: boolean,
    private readonly child: ChildProcess,
  ) {}

  subscribe(fn: (e: ProcEvent) => void): () => void {
    this.subs.add(fn);
    return () => this.subs.delete(fn);
  }
  emit(e: ProcEvent): void {
    for (const fn of this.subs) fn(e);
  }

  get stdinOpen(): boolean {
    const s = this.child.stdin;
    return !!s && !s.writableEnded && !s.destroyed;
  }
  writeStdin(data: Uint8Array): void {
    if (!this.stdinOpen) throw new ProcessRefused(`stdin of process ${this.pid} is closed or was not requested`);
    this.child.stdin!.write(data);
  }
  closeStdin(): void {
    if (!this.stdinOpen) throw new ProcessRefused(`stdin of process ${this.pid} is closed or was not requested`);
    this.child.stdin!.end();
  }
}

export interface SpawnOptions {
  tag?: string;
  stdin: boolean;
  pty: boolean;
  /** Host directory to start in (already resolved and checked by the caller). */
  cwdHost: string;
  env: Record<string, string>;
}

export class ProcessTable {
  private readonly procs = new Map<number, GuestProcess>();
  /** Every process group ever started here: a command's background children outlive their leader. */
  private readonly groups = new Set<number>();
  private paused = false;

  list(): GuestProcess[] {
    return [...this.procs.values()];
  }

  find(sel: Selector): GuestProcess {
    const p = "pid" in sel ? this.procs.get(sel.pid) : this.list().find((x) => x.tag === sel.tag);
    if (!p) throw new NoSuchProcess(`process ${"pid" in sel ? sel.pid : JSON.stringify(sel.tag)} not found`);
    return p;
  }

  /** Spawn and resolve once the OS has started it (or reject with why it could not). */
  async start(config: ProcessConfig, o: SpawnOptions, onEvent: (e: ProcEvent) => void): Promise<GuestProcess> {
    if (!existsSync(o.cwdHost) || !statSync(o.cwdHost).isDirectory()) throw new ProcessRefused(`cwd ${JSON.stringify(config.cwd ?? o.cwdHost)} is not a directory`);
    const child = spawn(config.cmd, config.args, {
      cwd: o.cwdHost,
      env: o.env,
      detached: true, // own process group: signals reach the whole tree
      stdio: [o.stdin || o.pty ? "pipe" : "ignore", "pipe", "pipe"],
    });
    await new Promise<void>((resolve, reject) => {
      child.once("spawn", resolve);
      child.once("error", (e) => reject(new ProcessRefused(`cannot start ${JSON.stringify(config.cmd)}: ${e.message}`)));
    });
    const pid = child.pid!;
    const proc = new GuestProcess(pid, config, o.tag, o.pty, child);
    proc.subscribe(onEvent);
    this.procs.set(pid, proc);
    this.groups.add(pid);
    if (this.paused) this.signalGroup(pid, "SIGSTOP");
    const out = (stream: "stdout" | "stderr") => (chunk: Buffer) =>
      proc.emit({ kind: "data", stream: o.pty ? "pty" : stream, data: new Uint8Array(chunk) });
    child.stdout!.on("data", out("stdout"));
    child.stderr!.on("data", out("stderr"));
    child.stdin?.on("error", () => {}); // writing to a process that exited is not the guest's failure
    // 'close' fires once the process exited and its output pipes drained, so the end event follows all output.
    child.once("close", (code, signal) => {
      const end: EndInfo =
        code !== null
          ? { exitCode: code, exited: true, status: `exit status ${code}` }
          : { exitCode: -1, exited: false, status: `signal: ${SIGNAL_NAMES[signal ?? ""] ?? signal}` };
      proc.ended = end;
      this.procs.delete(pid);
      proc.emit({ kind: "end", end });
    });
    return proc;
  }

  signal(sel: Selector, sig: "SIGTERM" | "SIGKILL"): void {
    const p = this.find(sel);
    this.signalGroup(p.pid, sig);
  }

  /** Hibernate: every group stops where it is. Processes started while paused start stopped. */
  pauseAll(): void {
    this.paused = true;
    for (const g of this.groups) this.signalGroup(g, "SIGSTOP");
  }
  resumeAll(): void {
    this.paused = false;
    for (const g of this.groups) this.signalGroup(g, "SIGCONT");
  }
  /** Destroy: SIGKILL every group (SIGCONT first is not needed: SIGKILL ends stopped processes too). */
  killAll(): void {
    for (const g of this.groups) this.signalGroup(g, "SIGKILL");
    this.groups.clear();
  }

  private signalGroup(pgid: number, sig: NodeJS.Signals): void {
    try {
      process.kill(-pgid, sig);
    } catch {
      // ESRCH: the group is gone already.
    }
  }
}
