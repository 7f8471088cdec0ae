import { describe, expect, test } from "bun:test";
import { chmodSync, existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ClaimsFile } from "../../../../../services/vk-sandbox/claims/file.ts";
import { ClaimsStateError } from "../../../../../services/vk-sandbox/claims/errors.ts";
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
