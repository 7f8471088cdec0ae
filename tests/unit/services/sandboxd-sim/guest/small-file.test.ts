// readSmallFile (services/sandboxd-sim/guest/small-file.ts): a file a sandbox controls is read without blocking the
// simulator's event loop and within a bound, whatever root inside made of it.
import { afterAll, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, symlinkSync, truncateSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { NotRegularFile, readSmallFile } from "#services/sandboxd-sim/guest/small-file.ts";

const dir = mkdtempSync(join(tmpdir(), "small-file-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

test("a regular file is read whole; a sparse file of gigabytes only up to the bound", () => {
  writeFileSync(join(dir, "passwd"), "user:x:1000:1000::/home/user:/bin/bash\n");
  expect(readSmallFile(join(dir, "passwd"))).toBe("user:x:1000:1000::/home/user:/bin/bash\n");
  truncateSync(join(dir, "passwd"), 3 * 1024 ** 3);
  expect(readSmallFile(join(dir, "passwd"), 4096)).toHaveLength(4096);
});

test("a FIFO without a writer is refused at once, and a link to an endless device too", () => {
  expect(spawnSync("mkfifo", [join(dir, "fifo")]).status).toBe(0);
  expect(() => readSmallFile(join(dir, "fifo"))).toThrow(NotRegularFile);
  symlinkSync("/dev/zero", join(dir, "zero"));
  expect(() => readSmallFile(join(dir, "zero"))).toThrow(NotRegularFile);
});
