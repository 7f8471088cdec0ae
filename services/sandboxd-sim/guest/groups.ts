// sandboxd-sim guest — development substrate, not product code. See README.md in this folder.
//
// The process groups one sandbox started, kept only while they are provably its own. A group's number is its
// leader's pid, and the kernel hands a pid out again once nothing uses it (as a pid or as a group id): with
// pid_max 32768 a busy host wraps within minutes. A number remembered past its group's end may by then lead a
// group of another sandbox or of the host, and hibernate (SIGSTOP), wake and destroy (SIGKILL) would reach it.
// So each group is kept with its leader's start time: a live leader that started at another time is not ours,
// and a number no live process carries as its group is dropped, both at every signal and by a sweep every few
// seconds (the number cannot come back before its pid has been handed out again, which takes the whole pid range).
import { readdirSync, readFileSync } from "node:fs";
import { statFields } from "./proc-stat.ts";

export interface ProcRow {
  pid: number;
  ppid: number;
  pgid: number;
  /** /proc/<pid>/stat field 22: clock ticks since boot. */
  start: string;
}

/** Every process of the host, read once (a process that exits meanwhile is left out). */
export function procSnapshot(): ProcRow[] {
  const out: ProcRow[] = [];
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const f = statFields(readFileSync(`/proc/${d}/stat`, "utf8"));
      out.push({ pid: Number(d), ppid: Number(f[1]), pgid: Number(f[2]), start: f[19]! });
    } catch {
      // exited meanwhile
    }
  }
  return out;
}

/** A running process's start time, or undefined when it is gone. */
export function startTimeOf(pid: number): string | undefined {
  try {
    return statFields(readFileSync(`/proc/${pid}/stat`, "utf8"))[19];
  } catch {
    return undefined;
  }
}

const SWEEP_MS = 2_000;
const watched = new Set<OwnGroups>();
let sweeper: ReturnType<typeof setInterval> | undefined;

function sweepAll(): void {
  const snapshot = procSnapshot();
  for (const g of watched) g.prune(snapshot);
}

export class OwnGroups {
  /** Group id → its leader's start time (undefined: the leader was gone before it could be read). */
  private readonly groups = new Map<number, string | undefined>();

  /** Remember the group `leader` leads (call right after it started). */
  add(leader: number): void {
    this.groups.set(leader, startTimeOf(leader));
    watched.add(this);
    if (!sweeper) {
      sweeper = setInterval(sweepAll, SWEEP_MS);
      sweeper.unref?.();
    }
  }

  clear(): void {
    this.groups.clear();
    this.unwatch();
  }

  get size(): number {
    return this.groups.size;
  }

  /** Drops the groups that ended or whose number now leads someone else's group. */
  prune(snapshot: readonly ProcRow[]): void {
    const byPid = new Map(snapshot.map((p) => [p.pid, p]));
    const inUse = new Set(snapshot.map((p) => p.pgid));
    for (const [id, start] of this.groups) {
      const leader = byPid.get(id);
      if (leader ? leader.start !== start : !inUse.has(id)) this.groups.delete(id);
    }
    if (this.groups.size === 0) this.unwatch();
  }

  /**
   * The live groups of this sandbox: its own (pruned first) plus the groups of every descendant still running (a
   * command under a terminal (`script`) or one that called setsid leads a group of its own).
   */
  live(): Set<number> {
    const snapshot = procSnapshot();
    this.prune(snapshot);
    const out = new Set(this.groups.keys());
    const children = new Map<number, ProcRow[]>();
    for (const p of snapshot) (children.get(p.ppid) ?? children.set(p.ppid, []).get(p.ppid)!).push(p);
    const queue = [...this.groups.keys()];
    while (queue.length) {
      for (const c of children.get(queue.pop()!) ?? []) {
        out.add(c.pgid);
        queue.push(c.pid);
      }
    }
    return out;
  }

  private unwatch(): void {
    watched.delete(this);
    if (watched.size === 0 && sweeper) {
      clearInterval(sweeper);
      sweeper = undefined;
    }
  }
}
