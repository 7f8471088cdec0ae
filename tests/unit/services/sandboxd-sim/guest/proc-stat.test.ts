// statFields (services/sandboxd-sim/guest/proc-stat.ts): /proc/<pid>/stat fields start after the last ")", so a
// process that names itself like the fields (comm is its own choice) cannot choose its parent or process group.
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { statFields } from "#services/sandboxd-sim/guest/proc-stat.ts";

test("a comm holding ') S <ppid> <pgid>' does not shift the fields", () => {
  const line = "4242 () S 777 1) S 4200 4242 4242 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 123456 0 0";
  const f = statFields(line);
  expect([f[0], f[1], f[2], f[19]]).toEqual(["S", "4200", "4242", "123456"]);
  // (The first-") " split read ppid 777 and pgid 1: SIGKILL to pgid 1 is every process.)
  expect(line.split(") ")[1]!.split(" ").slice(0, 3)).toEqual(["S", "777", "1"]);
});

test("this process's own stat line parses to its parent and group", () => {
  const f = statFields(readFileSync("/proc/self/stat", "utf8"));
  expect(Number(f[1])).toBe(process.ppid);
});
