// sandboxd-sim guest — development substrate, not product code. See README.md in this folder.
//
// One cgroup-v1 freezer cgroup per namespaced sandbox: hibernate freezes every process in it at once (those a
// command forked included), wake thaws them, release kills what is left and removes the cgroup. Where the
// freezer is not mounted the caller falls back to SIGSTOP/SIGCONT of the namespace's processes.
import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const FREEZER_ROOT = "/sys/fs/cgroup/freezer";

export class Freezer {
  private constructor(readonly dir: string) {}

  /** A cgroup for one sandbox, or undefined where the freezer controller is not available. */
  static create(name: string): Freezer | undefined {
    if (!existsSync(join(FREEZER_ROOT, "freezer.state")) && !existsSync(join(FREEZER_ROOT, "cgroup.procs"))) return undefined;
    const dir = join(FREEZER_ROOT, "sandboxd-sim", name);
    try {
      mkdirSync(dir, { recursive: true });
      return new Freezer(dir);
    } catch {
      return undefined;
    }
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

  freeze(): void {
    this.set("FROZEN");
  }
  thaw(): void {
    this.set("THAWED");
  }
  private set(state: string): void {
    try {
      writeFileSync(join(this.dir, "freezer.state"), state);
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
