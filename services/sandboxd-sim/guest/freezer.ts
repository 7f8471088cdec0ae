// sandboxd-sim guest — development substrate, not product code. See README.md in this folder.
//
// One freezer cgroup per namespaced sandbox: hibernate freezes every process in it at once (those a command
// forked included), wake thaws them, release kills what is left and removes the cgroup. cgroup v1's `freezer`
// controller where it is mounted (`freezer.state`), else cgroup v2's core freezer (`cgroup.freeze`, a unified
// hierarchy at /sys/fs/cgroup). Where neither works the caller falls back to SIGSTOP/SIGCONT of the sandbox's
// processes.
import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

export interface FreezerRoots {
  /** cgroup v1 freezer mount (default /sys/fs/cgroup/freezer). */
  v1?: string;
  /** cgroup v2 mount (default /sys/fs/cgroup, used only when it is a unified hierarchy). */
  v2?: string;
}

export class Freezer {
  private constructor(
    readonly dir: string,
    readonly version: 1 | 2,
  ) {}

  /** A cgroup for one sandbox, or undefined where no freezer is available. */
  static create(name: string, roots: FreezerRoots = {}): Freezer | undefined {
    const v1 = roots.v1 ?? "/sys/fs/cgroup/freezer";
    const v2 = roots.v2 ?? "/sys/fs/cgroup";
    const candidates: [string, 1 | 2][] = [];
    if (existsSync(join(v1, "cgroup.procs"))) candidates.push([v1, 1]);
    if (existsSync(join(v2, "cgroup.controllers"))) candidates.push([v2, 2]);
    for (const [root, version] of candidates) {
      const dir = join(root, "sandboxd-sim", name);
      try {
        mkdirSync(dir, { recursive: true });
        if (!existsSync(join(dir, version === 1 ? "freezer.state" : "cgroup.freeze"))) throw new Error("not a freezer cgroup");
        return new Freezer(dir, version);
      } catch {
        try {
          rmdirSync(dir);
        } catch {
          // not created
        }
      }
    }
    return undefined;
  }

  /** Existing sandbox cgroups whose name starts with `prefix` (a dead simulator's, found at the next start: reap.ts). */
  static existing(prefix: string, roots: FreezerRoots = {}): Freezer[] {
    const out: Freezer[] = [];
    for (const [root, version] of [[roots.v1 ?? "/sys/fs/cgroup/freezer", 1], [roots.v2 ?? "/sys/fs/cgroup", 2]] as const) {
      const parent = join(root, "sandboxd-sim");
      let names: string[] = [];
      try {
        names = readdirSync(parent);
      } catch {
        continue; // no such hierarchy, or none made here
      }
      for (const n of names) if (n.startsWith(prefix)) out.push(new Freezer(join(parent, n), version));
    }
    return out;
  }

  /** The file a process writes its pid to so that it (and everything it forks later) joins the cgroup. */
  get procsFile(): string {
    return join(this.dir, "cgroup.procs");
  }

  pids(): number[] {
    try {
      return readFileSync(this.procsFile, "utf8").split("\n").filter(Boolean).map(Number);
    } catch {
      return [];
    }
  }

  /** Whether every process in it is frozen now (freezing takes effect asynchronously). */
  frozen(): boolean {
    try {
      if (this.version === 1) return readFileSync(join(this.dir, "freezer.state"), "utf8").trim() === "FROZEN";
      return /^frozen 1$/m.test(readFileSync(join(this.dir, "cgroup.events"), "utf8"));
    } catch {
      return false;
    }
  }

  freeze(): void {
    this.set(true);
  }
  thaw(): void {
    this.set(false);
  }
  private set(frozen: boolean): void {
    try {
      if (this.version === 1) writeFileSync(join(this.dir, "freezer.state"), frozen ? "FROZEN" : "THAWED");
      else writeFileSync(join(this.dir, "cgroup.freeze"), frozen ? "1" : "0");
    } catch {
      // removed already
    }
  }

  /** Remove the cgroup once empty; false while processes are still leaving. */
  remove(): boolean {
    try {
      rmdirSync(this.dir);
      return true;
    } catch (e) {
      return (e as NodeJS.ErrnoException).code === "ENOENT";
    }
  }
}
