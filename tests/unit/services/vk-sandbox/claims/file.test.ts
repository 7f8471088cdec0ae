import { describe, expect, test } from "bun:test";
import { chmodSync, closeSync, existsSync, fchmodSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, statSync, unlinkSync, writeFileSync, writevSync } from "node:fs";
import { join } from "node:path";
import * as fsp from "node:fs/promises";
import { ClaimsFile, type ClaimsFs } from "#services/vk-sandbox/claims/file.ts";

/** node:fs behind the ClaimsFs seam, for a test that changes one call. */
function realFs(): ClaimsFs {
  return {
    readFile: (p, e) => fsp.readFile(p, e),
    mkdirSync: (p, o) => mkdirSync(p, o),
    openSync: (p, flags, mode) => openSync(p, flags, mode),
    fchmodSync: (fd, m) => fchmodSync(fd, m),
    writeFileSync: (fd, d) => writeFileSync(fd, d),
    writevSync: (fd, parts, pos) => writevSync(fd, parts as Uint8Array[], pos),
    fsync: async (fd) => fsyncSync(fd),
    closeSync: (fd) => closeSync(fd),
    renameSync: (a, b) => renameSync(a, b),
    unlinkSync: (p) => unlinkSync(p),
  };
}
import { ClaimsStateError } from "#services/vk-sandbox/claims/errors.ts";
import { scratchDirs } from "../provider/helpers.ts";

const T0 = Date.UTC(2026, 6, 27, 2, 15, 0);
const dir = scratchDirs();

describe("durable claims file", () => {
  test("a missing file loads as an empty table", async () => {
    const f = new ClaimsFile({ path: join(dir(), "nope", "claims.json") });
    expect((await f.load(T0)).claims.size).toBe(0);
  });

  test("a write creates the directory 0700 and the file 0600, and leaves no tmp file", async () => {
    const path = join(dir(), "state", "claims.json");
    const f = new ClaimsFile({ path });
    await f.write('{"claims":{}}');
    expect(statSync(join(path, "..")).mode & 0o777).toBe(0o700);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(readFileSync(path, "utf8")).toBe('{"claims":{}}');
    expect(existsSync(`${path}.tmp`)).toBe(false);
  });

  test("the directory is recreated on every write", async () => {
    const d = dir();
    const path = join(d, "state", "claims.json");
    const f = new ClaimsFile({ path });
    await f.write('{"claims":{}}');
    (await import("node:fs")).rmSync(join(d, "state"), { recursive: true });
    await f.write('{"claims":{"a/b":{"id":"x","token":"t","podUID":""}}}');
    expect(statSync(join(d, "state")).mode & 0o777).toBe(0o700);
    expect((await f.load(T0)).claims.size).toBe(1);
  });

  test("a stale tmp file with a looser mode does not leak its mode into the table", async () => {
    const d = dir();
    const path = join(d, "claims.json");
    writeFileSync(`${path}.tmp`, "junk");
    chmodSync(`${path}.tmp`, 0o644);
    await new ClaimsFile({ path }).write('{"claims":{}}');
    expect(statSync(path).mode & 0o777).toBe(0o600);
  });

  test("an unwritable path fails with a state error naming the file", async () => {
    const d = dir();
    writeFileSync(join(d, "blocker"), "a file where a directory should be");
    const f = new ClaimsFile({ path: join(d, "blocker", "claims.json") });
    const err = await f.write('{"claims":{}}').catch((e) => e);
    expect(err).toBeInstanceOf(ClaimsStateError);
    expect(err.code).toBe("unwritable");
    expect(err.message).toContain("claims state is not writable");
    expect(err.message).toContain(join(d, "blocker", "claims.json"));
  });

  test("an unreadable path is fatal at load, not an empty table", async () => {
    const d = dir();
    mkdirSync(join(d, "claims.json"));
    const err = await new ClaimsFile({ path: join(d, "claims.json") }).load(T0).catch((e) => e);
    expect(err).toBeInstanceOf(ClaimsStateError);
    expect(err.code).toBe("unreadable");
  });

  test("a malformed file is fatal at load and left unchanged", async () => {
    const path = join(dir(), "claims.json");
    writeFileSync(path, "{broken");
    const err = await new ClaimsFile({ path }).load(T0).catch((e) => e);
    expect(err.code).toBe("malformed");
    expect(readFileSync(path, "utf8")).toBe("{broken");
  });

  test("a table in more byte ranges than one writev takes (IOV_MAX 1024) is written whole and in order", async () => {
    const path = join(dir(), "claims.json");
    const rows = Array.from({ length: 3000 }, (_, i) => `${i === 0 ? "" : ","}"ns/p${i}":{"id":"sb_${i}","token":"t","podUID":""}`);
    const parts = [Buffer.from('{"claims":{'), ...rows.map((r) => Buffer.from(r)), Buffer.from("}}")];
    const f = new ClaimsFile({ path });
    await f.write(parts);
    expect(readFileSync(path, "utf8")).toBe(`{"claims":{${rows.join("")}}}`);
    // A kernel may write less than asked: the rest goes again, at the right offset.
    const short = new ClaimsFile({
      path: join(dir(), "short.json"),
      fs: { ...realFs(), writevSync: (fd, p, pos) => writevSync(fd, [Buffer.concat(p as Uint8Array[]).subarray(0, 777)], pos) },
    });
    await short.write(parts);
    expect(readFileSync(short.path, "utf8")).toBe(`{"claims":{${rows.join("")}}}`);
    expect(f.bytesWritten).toBe(Buffer.concat(parts).byteLength);
    expect((await f.load(0)).claims.size).toBe(3000);
  });

  test("an empty state path is refused", () => {
    expect(() => new ClaimsFile({ path: "" })).toThrow(ClaimsStateError);
  });

  test("serialised writes land in call order, so the newest text wins", async () => {
    const path = join(dir(), "claims.json");
    const f = new ClaimsFile({ path });
    await Promise.all(Array.from({ length: 20 }, (_, i) => f.write(`{"claims":{},"n":${i}}`)));
    expect(JSON.parse(readFileSync(path, "utf8")).n).toBe(19);
  });
});

describe("crash consistency (issue 7 safety net): the file is always the old or the new table", () => {
  /**
   * node:fs with every call the write makes recorded in order, each when it has finished; descriptors are named by
   * the path they opened.
   */
  function recordingFs(log: string[], crashAt?: string) {
    const step = (what: string) => {
      log.push(what);
      if (crashAt && (what === crashAt || what.startsWith(`${crashAt} `))) throw new Error(`crash at ${what}`);
    };
    return (base: string): ClaimsFs => {
      const name = (p: unknown) => String(p).replace(base, "<dir>");
      const fds = new Map<number, string>();
      return {
        readFile: (p, e) => fsp.readFile(p, e),
        mkdirSync: (p, o) => (step(`mkdir ${name(p)}`), mkdirSync(p, o)),
        openSync: (p, flags, mode) => {
          step(`open ${name(p)} ${flags}`);
          const fd = openSync(p, flags, mode);
          fds.set(fd, name(p));
          return fd;
        },
        fchmodSync: (fd, m) => (step(`chmod ${fds.get(fd)}`), fchmodSync(fd, m)),
        writeFileSync: (fd, d) => (step(`write ${fds.get(fd)}`), writeFileSync(fd, d)),
        writevSync: (fd, parts, pos) => (step(`write ${fds.get(fd)}`), writevSync(fd, parts as Uint8Array[], pos)),
        // Recorded when it finishes, a turn later like a real disk wait: a write that stopped awaiting an fsync
        // would close (or rename) before this line is logged, which a record made at the call would hide.
        fsync: async (fd) => {
          const what = `fsync ${fds.get(fd)}`;
          await new Promise((r) => setImmediate(r));
          fsyncSync(fd);
          step(what);
        },
        closeSync: (fd) => (log.push(`close ${fds.get(fd)}`), closeSync(fd)),
        renameSync: (a, b) => (step(`rename ${name(a)} -> ${name(b)}`), renameSync(a, b)),
        unlinkSync: (p) => (log.push(`unlink ${name(p)}`), unlinkSync(p)),
      };
    };
  }

  // The store hands the table as byte ranges (one writev); other writers pass text. Both take the same steps.
  test.each([
    ["text", '{"claims":{}}'],
    ["byte ranges", [Buffer.from('{"claims":'), Buffer.from("{}}")]],
  ] as const)("write order (%s): tmp written and fsynced, closed, renamed over the file, then the directory fsynced", async (_form, body) => {
    const base = join(dir(), "state");
    const log: string[] = [];
    const f = new ClaimsFile({ path: join(base, "claims.json"), fs: recordingFs(log)(base) });
    await f.write(body);
    expect(readFileSync(join(base, "claims.json"), "utf8")).toBe('{"claims":{}}');
    expect(log).toEqual([
      "mkdir <dir>",
      "open <dir>/claims.json.tmp w",
      "chmod <dir>/claims.json.tmp",
      "write <dir>/claims.json.tmp",
      "fsync <dir>/claims.json.tmp",
      "close <dir>/claims.json.tmp",
      "rename <dir>/claims.json.tmp -> <dir>/claims.json",
      "open <dir> r",
      "fsync <dir>",
      "close <dir>",
    ]);
  });

  test.each(["open", "chmod", "write", "fsync <dir>/claims.json.tmp", "rename", "fsync <dir>"])(
    "a crash at %s leaves the old table or the new one, never a torn or empty file",
    async (crashAt) => {
      const base = join(dir(), "state");
      const path = join(base, "claims.json");
      const OLD = '{"claims":{"ns/a":{"id":"sb_old","token":"t","podUID":"u"}}}';
      const NEW = '{"claims":{"ns/b":{"id":"sb_new","token":"t","podUID":"u"}}}';
      await new ClaimsFile({ path }).write(OLD);
      const log: string[] = [];
      await expect(new ClaimsFile({ path, fs: recordingFs(log, crashAt)(base) }).write(NEW)).rejects.toThrow(ClaimsStateError);
      const after = readFileSync(path, "utf8");
      // Before the rename the old table stands; the rename is the one atomic switch.
      expect(after).toBe(crashAt === "fsync <dir>" ? NEW : OLD);
      expect((await new ClaimsFile({ path }).load(T0)).claims.size).toBe(1);
    },
  );
});
