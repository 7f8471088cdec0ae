// Guest paths: whatever a client sends, the files API resolves inside the sandbox's directory.
import { describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { GuestPaths, PathError } from "#services/sandboxd-sim/guest/paths.ts";

const root = "/tmp/sim-guests/sb_0123456789abcdef";
const paths = new GuestPaths(root);

describe("GuestPaths", () => {
  test("relative paths are under /home/user; absolute guest paths under the root; replies use guest paths", () => {
    expect(paths.toHost("a.txt")).toBe(`${root}/home/user/a.txt`);
    expect(paths.toHost("/home/user/a.txt")).toBe(`${root}/home/user/a.txt`);
    expect(paths.toHost("/etc/hosts")).toBe(`${root}/etc/hosts`);
    expect(paths.toHost("")).toBe(`${root}/home/user`);
    expect(paths.toGuest(`${root}/home/user/a.txt`)).toBe("/home/user/a.txt");
    expect(paths.toGuest(root)).toBe("/");
  });

  test("a host path inside the sandbox (what pwd prints in a command) is taken as is", () => {
    expect(paths.toHost(`${root}/home/user/x`)).toBe(`${root}/home/user/x`);
  });

  test("'..' never climbs out: /../../etc is the sandbox's /etc", () => {
    expect(paths.toHost("../../../../etc/passwd")).toBe(`${root}/etc/passwd`);
    // A host-looking path that leaves the root is read as a guest path: /tmp/etc inside the sandbox.
    expect(paths.toHost(`${root}/../../etc`)).toBe(`${root}/tmp/etc`);
  });

  test("property: any path resolves to the root or below it, and round-trips through its guest form", () => {
    const segment = fc.constantFrom("..", ".", "", "a", "b c", "~", "sb_0123456789abcdef", "home", "user");
    const pathArb = fc.tuple(fc.boolean(), fc.array(segment, { maxLength: 8 })).map(([abs, segs]) => (abs ? "/" : "") + segs.join("/"));
    fc.assert(
      fc.property(pathArb, (p) => {
        let host: string;
        try {
          host = paths.toHost(p);
        } catch (e) {
          expect(e).toBeInstanceOf(PathError);
          return;
        }
        expect(host === root || host.startsWith(`${root}/`)).toBe(true);
        expect(paths.toHost(paths.toGuest(host))).toBe(host);
      }),
      { numRuns: 2000 },
    );
  });

  test("links resolve inside the root (issue 27): an absolute target starts at the sandbox's /, '..' stops there, the last one is kept when asked, a loop is refused", () => {
    const dir = mkdtempSync(join(tmpdir(), "guest-paths-"));
    try {
      const p = new GuestPaths(dir);
      mkdirSync(join(dir, "home/user"), { recursive: true });
      mkdirSync(join(dir, "etc"));
      mkdirSync(join(dir, "data"));
      symlinkSync("/etc/shadow", join(dir, "home/user/shadow"));
      symlinkSync("../../../../../../root", join(dir, "home/user/up"));
      symlinkSync("/data", join(dir, "home/user/d"));
      symlinkSync("loop2", join(dir, "home/user/loop1"));
      symlinkSync("loop1", join(dir, "home/user/loop2"));
      expect(p.toHost("shadow")).toBe(join(dir, "etc/shadow"));
      expect(p.toHost("up/.ssh/id_rsa")).toBe(join(dir, "root/.ssh/id_rsa"));
      expect(p.toHost("d/new.txt")).toBe(join(dir, "data/new.txt"));
      expect(p.toHost(`${dir}/home/user/shadow`)).toBe(join(dir, "etc/shadow"));
      // remove, rename and stat act on the link itself; its parents still resolve.
      expect(p.toHost("shadow", undefined, { follow: false })).toBe(join(dir, "home/user/shadow"));
      expect(p.toHost("d/x", undefined, { follow: false })).toBe(join(dir, "data/x"));
      expect(() => p.toHost("loop1")).toThrow(PathError);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
