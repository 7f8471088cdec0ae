// sandboxd-sim guest — development substrate, not product code. See README.md in this folder.
//
// The sandbox's processes: plain host child processes, each the leader of its own process group so a signal
// reaches everything it started (a shell's children included). Hibernate stops every group (SIGSTOP), wake
// resumes them (SIGCONT), destroy kills them (SIGKILL). Events (start, output, end) fan out to every stream
// attached to the process: the Start stream that spawned it and any Connect streams.
import { spawn, type ChildProcess } from "node:child_process";
import { execFileSync } from "node:child_process";
import { existsSync, statSync } from "node:fs";
import { OwnGroups, procSnapshot } from "./groups.ts";

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
  /** When it was started (ms, monotonic): start commands are re-run in this order. */
  readonly startedAt = performance.now();

  constructor(
    readonly pid: number,
    readonly config: ProcessConfig,
    readonly tag: string | undefined,
    readonly pty: boolean,
    private readonly child: ChildProcess,
    /** The user the request named (undefined: the sandbox's default user); a promote re-runs it as the same one. */
    readonly user?: string,
  ) {}

  /** Streams holding the output back (their reader is behind): while any does, the output pipes are not read. */
  private holds = 0;

  /**
   * A stream whose reader is behind holds the output back, as envd does: the pipes fill and the process blocks on
   * its writes, so a command printing without end costs the guest no memory and its reader no backlog.
   */
  hold(): void {
    if (this.holds++ === 0) {
      this.child.stdout?.pause();
      this.child.stderr?.pause();
    }
  }
  release(): void {
    if (this.holds === 0) return;
    if (--this.holds === 0) {
      this.child.stdout?.resume();
      this.child.stderr?.resume();
    }
  }

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

  /**
   * Resize the process's terminal: find the pseudo-terminal its command reads as stdin and set its size with
   * stty; the kernel then signals SIGWINCH to the terminal's foreground group, as with a terminal emulator.
   * A process without a terminal is refused.
   */
  resize(cols: number, rows: number): void {
    const tty = this.pty ? terminalOf(this.pid) : undefined;
    if (!tty) throw new ProcessRefused(`process ${this.pid} has no terminal`);
    execFileSync("stty", ["-F", tty, "cols", String(cols), "rows", String(rows)], { stdio: "ignore" });
  }
}

/**
 * The terminal the command under `script` (a descendant of `leader`) reads as stdin, as /proc/<pid>/fd/0: that
 * path reopens the same pseudo-terminal from the host even when it lives in a sandbox's own devpts instance.
 * `script` starts the command in a session of its own, so it is found by parentage, not by process group.
 */
function terminalOf(leader: number): string | undefined {
  const children = new Map<number, number[]>();
  for (const { pid, ppid } of procSnapshot()) (children.get(ppid) ?? children.set(ppid, []).get(ppid)!).push(pid);
  const queue = [...(children.get(leader) ?? [])];
  while (queue.length) {
    const pid = queue.shift()!;
    try {
      // A pty slave (Unix98 majors 136-143), whichever devpts instance holds it.
      const major = Math.floor(statSync(`/proc/${pid}/fd/0`).rdev / 256) & 0xfff;
      if (major >= 136 && major <= 143) return `/proc/${pid}/fd/0`;
    } catch {
      // exited, or not ours to read
    }
    queue.push(...(children.get(pid) ?? []));
  }
  return undefined;
}

export interface SpawnOptions {
  tag?: string;
  /** The user the request named, kept with the process (captures.ts re-runs a start command as it). */
  user?: string;
  stdin: boolean;
  /** A terminal of this size (cols x rows) instead of pipes. */
  pty?: { cols: number; rows: number };
  /** Host directory to start in (already resolved and checked by the caller). */
  cwdHost: string;
  env: Record<string, string>;
  /** Namespaced sandbox: the guest directory and identity the command runs with inside (namespace.ts). */
  inside?: { cwd: string; uid: number; gid: number };
}

/** Turns a command line into the host command that runs it inside a namespaced sandbox. */
export type Launcher = (argv: string[], cwd: string, who: { uid: number; gid: number }) => [string, string[]];

const quote = (s: string) => `'${s.replaceAll("'", "'\\''")}'`;
const HAS_SCRIPT = existsSync("/usr/bin/script");

/**
 * A terminal for a pty request: util-linux `script` runs the command on a real pseudo-terminal of the asked size
 * (input written to script's stdin reaches the terminal; the terminal's output is script's stdout). Without
 * `script`, the command runs on plain pipes and its output is still reported as pty data.
 */
function inTerminal(c: ProcessConfig, size: { cols: number; rows: number }): [string, string[]] {
  if (!HAS_SCRIPT) return [c.cmd, c.args];
  const sizeCmd = size.cols > 0 && size.rows > 0 ? `stty cols ${size.cols} rows ${size.rows} 2>/dev/null; ` : "";
  return ["/usr/bin/script", ["-qfec", `${sizeCmd}exec ${[c.cmd, ...c.args].map(quote).join(" ")}`, "/dev/null"]];
}

export class ProcessTable {
  private readonly procs = new Map<number, GuestProcess>();
  /** The process groups started here, while they are still theirs (groups.ts): a command's background children outlive their leader. */
  private readonly groups = new OwnGroups();
  private paused = false;

  constructor(private readonly launcher?: Launcher) {}

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
    // A namespaced sandbox never runs a command on the host: one without its identity inside is refused.
    if (this.launcher && !o.inside) throw new ProcessRefused(`cannot start ${JSON.stringify(config.cmd)}: no user inside the sandbox`);
    const [cmd0, args0] = o.pty ? inTerminal(config, o.pty) : [config.cmd, config.args];
    const [cmd, args] = this.launcher && o.inside ? this.launcher([cmd0, ...args0], o.inside.cwd, o.inside) : [cmd0, args0];
    const child = spawn(cmd, args, {
      cwd: this.launcher ? "/" : o.cwdHost,
      env: o.env,
      detached: true, // own process group: signals reach the whole tree
      stdio: [o.stdin || o.pty ? "pipe" : "ignore", "pipe", "pipe"],
    });
    await new Promise<void>((resolve, reject) => {
      child.once("spawn", resolve);
      child.once("error", (e) => reject(new ProcessRefused(`cannot start ${JSON.stringify(config.cmd)}: ${e.message}`)));
    });
    const pid = child.pid!;
    const proc = new GuestProcess(pid, config, o.tag, o.pty !== undefined, child, o.user);
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
    for (const g of this.allGroups()) this.signalGroup(g, "SIGSTOP");
  }
  resumeAll(): void {
    this.paused = false;
    for (const g of this.allGroups()) this.signalGroup(g, "SIGCONT");
  }
  /** Destroy: SIGKILL every group (SIGCONT first is not needed: SIGKILL ends stopped processes too). */
  killAll(): void {
    for (const g of this.allGroups()) this.signalGroup(g, "SIGKILL");
    this.groups.clear();
  }

  private allGroups(): Set<number> {
    return this.groups.live();
  }

  private signalGroup(pgid: number, sig: NodeJS.Signals): void {
    // -1 is every process, -0 the simulator's own group: never a sandbox's (a pgid read from /proc is checked here too).
    if (!Number.isInteger(pgid) || pgid <= 1) return;
    try {
      process.kill(-pgid, sig);
    } catch {
      // ESRCH: the group is gone already.
    }
  }
}
