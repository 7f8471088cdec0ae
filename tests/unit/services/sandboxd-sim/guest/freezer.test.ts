// The per-sandbox freezer cgroup (guest/freezer.ts) on both cgroup versions this host mounts: a frozen cgroup's
// process makes no progress, a thawed one goes on, and the cgroup is removed once empty. Needs root and the
// hierarchy; a host without one of them skips that version (the guest then uses the other, or SIGSTOP).
import { afterAll, afterEach, describe, expect, test } from "bun:test";
import { existsSync, readFileSync, rmdirSync, writeFileSync } from "node:fs";
import { Freezer } from "#services/sandboxd-sim/guest/freezer.ts";
import { waitFor } from "#tests/support/wait.ts";

const AS_ROOT = process.getuid?.() === 0;
const V1 = "/sys/fs/cgroup/freezer";
// A hybrid host mounts its unified hierarchy here; a pure v2 host at /sys/fs/cgroup.
const V2 = existsSync("/sys/fs/cgroup/unified/cgroup.controllers") ? "/sys/fs/cgroup/unified" : "/sys/fs/cgroup";
const cleanups: (() => void)[] = [];
afterEach(() => cleanups.splice(0).forEach((f) => f()));
// The v2 parent is this test's own on a hybrid host (the guests use v1 there); v1's is shared with running guests.
afterAll(() => {
  try {
    rmdirSync(`${V2}/sandboxd-sim`);
  } catch {
    // in use or never made
  }
});

/** A busy counter process (utime in /proc/<pid>/stat moves only while it runs). */
function spin(): { pid: number; cpu: () => number } {
  const p = Bun.spawn(["sh", "-c", "while :; do :; done"]);
  cleanups.push(() => p.kill("SIGKILL"));
  return { pid: p.pid, cpu: () => Number(readFileSync(`/proc/${p.pid}/stat`, "utf8").split(") ")[1]!.split(" ")[11]) };
}

describe.each([
  ["v1", { v1: V1, v2: "/nonexistent" }, AS_ROOT && existsSync(`${V1}/cgroup.procs`)],
  ["v2", { v1: "/nonexistent", v2: V2 }, AS_ROOT && existsSync(`${V2}/cgroup.controllers`)],
] as const)("cgroup %s", (version, roots, available) => {
  (available ? test : test.skip)("freeze stops every process in it, thaw resumes them, remove needs it empty", async () => {
    const f = Freezer.create(`unit-${version}-${process.pid}`, roots);
    expect(f?.version).toBe(version === "v1" ? 1 : 2);
    const s = spin();
    writeFileSync(f!.procsFile, String(s.pid));
    expect(f!.pids()).toEqual([s.pid]);
    f!.freeze();
    await waitFor("frozen", () => f!.frozen());
    const at = s.cpu();
    await Bun.sleep(300);
    expect(s.cpu()).toBe(at);
    f!.thaw();
    await waitFor("running again", () => s.cpu() > at);
    expect(f!.remove()).toBe(false); // a process is still in it
    process.kill(s.pid, "SIGKILL");
    await waitFor("removed once empty", () => f!.remove());
    expect(existsSync(f!.dir)).toBe(false);
  });
});

test("no hierarchy at all: no freezer (the caller falls back to SIGSTOP)", () => {
  expect(Freezer.create("none", { v1: "/nonexistent", v2: "/nonexistent" })).toBeUndefined();
});
