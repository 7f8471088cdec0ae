// A sandbox's process groups (services/sandboxd-sim/guest/groups.ts): once a group has ended, its number is the
// kernel's to hand out again (pid_max is 32768 on these machines, so a busy host wraps within minutes), and the
// sandbox's hibernate, wake and destroy must not reach whichever process leads a group of that number next.
// The reuse is forced with /proc/sys/kernel/ns_last_pid (root only): the next process created gets the old number.
import { afterEach, expect, test } from "bun:test";
import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { ProcessTable } from "#services/sandboxd-sim/guest/processes.ts";

const isRoot = process.getuid?.() === 0;
const others: ChildProcess[] = [];
afterEach(() => {
  for (const c of others.splice(0)) c.kill("SIGKILL");
});

/** The state letter of a process (R, S, T for stopped …), or undefined once it is gone. */
function stateOf(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[0];
  } catch {
    return undefined;
  }
}

/**
 * Starts a host process that leads its own group under `pid`; undefined when another process of the host took the
 * number first (it then keeps it: the caller starts over with another ended group).
 */
async function groupLeaderAt(pid: number): Promise<ChildProcess | undefined> {
  writeFileSync("/proc/sys/kernel/ns_last_pid", String(pid - 1));
  const c = spawn("sleep", ["300"], { detached: true, stdio: "ignore" });
  others.push(c);
  await new Promise<void>((r) => c.once("spawn", () => r()));
  return c.pid === pid ? c : undefined;
}

async function endedGroup(table: ProcessTable): Promise<number> {
  let ended!: () => void;
  const done = new Promise<void>((r) => (ended = r));
  const p = await table.start({ cmd: "true", args: [], envs: {} }, { stdin: false, cwdHost: tmpdir(), env: {} }, (e) => {
    if (e.kind === "end") ended();
  });
  await done;
  // 'close' has fired: the leader was reaped, so its number is free.
  return p.pid;
}

/** Waits (polling /proc) until `pid`'s state is one of `states` (undefined: gone). */
async function until(pid: number, states: (string | undefined)[]): Promise<void> {
  while (!states.includes(stateOf(pid))) await Bun.sleep(10);
}

const sleeper = (table: ProcessTable) => table.start({ cmd: "sleep", args: ["300"], envs: {} }, { stdin: false, cwdHost: tmpdir(), env: {} }, () => {});

// ns_last_pid is written through /proc/sys, which only root may do.
test.skipIf(!isRoot)("a group that ended is not signalled when its number leads another group: hibernate, wake and destroy leave it alone", async () => {
  const table = new ProcessTable();
  const own = await sleeper(table); // the sandbox's live command: when it is stopped (or gone), the signals were sent
  let old = 0;
  let other: ChildProcess | undefined;
  for (let attempt = 0; attempt < 50 && !other; attempt++) {
    old = await endedGroup(table);
    // Start times are kept in clock ticks (10 ms): the newcomer must start in a later tick than the ended leader, as
    // any real reuse does (the number comes back only after the whole pid range was handed out).
    await Bun.sleep(30);
    other = await groupLeaderAt(old);
  }
  expect(other, "in 50 tries another process of the host always took the ended group's number first").toBeDefined();

  table.pauseAll();
  await until(own.pid, ["T"]);
  expect(stateOf(old)).not.toBe("T"); // the old table SIGSTOPped it
  table.resumeAll();
  await until(own.pid, ["S", "R"]);
  table.killAll();
  await until(own.pid, ["Z", undefined]);
  expect(stateOf(old) ?? "gone").toMatch(/^[SR]$/); // the old table SIGKILLed it
});

test("a group still running is its sandbox's: hibernate stops it, wake resumes it, destroy ends it", async () => {
  const table = new ProcessTable();
  const p = await sleeper(table);
  table.pauseAll();
  await until(p.pid, ["T"]);
  table.resumeAll();
  await until(p.pid, ["S", "R"]);
  table.killAll();
  await until(p.pid, ["Z", undefined]);
});
