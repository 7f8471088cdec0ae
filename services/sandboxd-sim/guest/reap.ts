// sandboxd-sim guest — development substrate, not product code. See README.md in this folder.
//
// What a simulator killed with SIGKILL leaves behind, removed by the next one that starts on the same guest
// directory (GuestHostOptions.dir, the standalone simulator's --guest-dir; default the OS temp dir). Each node's
// base directory carries `owner.json` (the simulator's pid and its start time, so a reused pid is not taken for
// it); a base directory whose owner no longer runs is dead. Its leftovers:
//   - processes: every namespaced sandbox's `unshare` holder (its command line names the sandbox directory; killing
//     it kills the sandbox's PID 1 and with it the PID namespace), every process in a PID namespace recorded in a
//     sandbox's `ns.json`, the ports relay (its command line names the directory), and process-sandbox commands
//     (their working directory is inside the base directory);
//   - its freezer cgroups (`sandboxd-sim/<base name>-<id>`): thawed first, or their SIGKILLed processes never die;
//   - mounts: none in the host's mount namespace; a sandbox's overlays live in its own mount namespace and go with
//     its last process;
//   - the base directory itself, with every sandbox layer and template copy in it.
// Nothing is re-adopted: claims live in the simulator's memory only, so no claim of the dead instance survives it.
// A base directory without `owner.json` (an older simulator's) is left alone.
import { readdirSync, readFileSync, readlinkSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import { Freezer } from "./freezer.ts";
import { removeTree } from "./layer.ts";
import { startTimeOf } from "./groups.ts";

export const BASE_PREFIX = "sandboxd-sim-guests-";
const OWNER_FILE = "owner.json";
const NS_FILE = "ns.json";
/** How long to wait for a dead instance's processes to go before removing its files anyway. */
const REAP_WAIT_MS = 5_000;

/** Mark `baseDir` as this process's (the next simulator judges it dead once this process is gone). */
export function markOwner(baseDir: string): void {
  writeFileSync(join(baseDir, OWNER_FILE), JSON.stringify({ pid: process.pid, start: startTimeOf(process.pid) }));
}

/** Record a namespaced sandbox's PID namespace in its directory, for reapDead after a SIGKILL. */
export function recordNamespace(dir: string, pid1: number, nsLink: string): void {
  try {
    writeFileSync(join(dir, NS_FILE), JSON.stringify({ pid1, start: startTimeOf(pid1), ns: nsLink }));
  } catch {
    // the sandbox is being removed already
  }
}

function ownerAlive(baseDir: string): boolean | undefined {
  let owner: { pid?: unknown; start?: unknown };
  try {
    owner = JSON.parse(readFileSync(join(baseDir, OWNER_FILE), "utf8")) as typeof owner;
  } catch {
    return undefined; // no owner file: not ours to judge
  }
  if (typeof owner.pid !== "number") return undefined;
  const start = startTimeOf(owner.pid);
  return start !== undefined && start === owner.start;
}

/** PID namespaces recorded by the sandboxes of a dead base directory. */
function recordedNamespaces(baseDir: string): Set<string> {
  const out = new Set<string>();
  for (const id of readdirSync(baseDir)) {
    try {
      const r = JSON.parse(readFileSync(join(baseDir, id, NS_FILE), "utf8")) as { ns?: unknown };
      if (typeof r.ns === "string") out.add(r.ns);
    } catch {
      // not a namespaced sandbox, or it never came up
    }
  }
  return out;
}

/** Host pids that belong to a dead base directory (see the header). */
export function leftoverPids(baseDir: string, namespaces: Set<string> = recordedNamespaces(baseDir)): number[] {
  const out: number[] = [];
  const needle = `${baseDir}/`;
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d) || Number(d) === process.pid) continue;
    try {
      const cmd = readFileSync(`/proc/${d}/cmdline`, "utf8");
      let hit = cmd.includes(needle);
      if (!hit) {
        try {
          hit = readlinkSync(`/proc/${d}/cwd`).startsWith(needle) || namespaces.has(readlinkSync(`/proc/${d}/ns/pid`));
        } catch {
          // not ours to read
        }
      }
      if (hit) out.push(Number(d));
    } catch {
      // exited meanwhile
    }
  }
  return out;
}

function kill(pid: number): void {
  try {
    process.kill(pid, "SIGKILL");
  } catch {
    // gone already
  }
}

/**
 * Remove what dead simulators left in `parent`: their processes, freezer cgroups and directories. Returns the base
 * directories removed. Synchronous (it runs before a new node makes its own base directory), bounded by REAP_WAIT_MS.
 */
export function reapDead(parent: string): string[] {
  let names: string[];
  try {
    names = readdirSync(parent).filter((n) => n.startsWith(BASE_PREFIX));
  } catch {
    return [];
  }
  const removed: string[] = [];
  for (const name of names) {
    const baseDir = join(parent, name);
    if (ownerAlive(baseDir) !== false) continue;
    const cgroups = Freezer.existing(`${basename(baseDir)}-`);
    for (const c of cgroups) c.thaw();
    const namespaces = recordedNamespaces(baseDir);
    const deadline = Date.now() + REAP_WAIT_MS;
    for (;;) {
      const pids = [...leftoverPids(baseDir, namespaces), ...cgroups.flatMap((c) => c.pids())];
      if (pids.length === 0 || Date.now() > deadline) break;
      for (const p of pids) kill(p);
      Bun.sleepSync(10);
    }
    for (const c of cgroups) c.remove();
    removeTree(baseDir);
    removed.push(baseDir);
  }
  return removed;
}
