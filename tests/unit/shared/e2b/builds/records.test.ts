// Build records, their log pages and the slots (docs/e2b.md §6.1, §6.2).
import { describe, expect, test } from "bun:test";
import { FakeClock } from "#shared/clock/index.ts";
import { BuildLog, BuildRecords, LOG_MAX_BYTES, MAX_RECORDS_PER_NAMESPACE, PAGE_MAX_BYTES, PAGE_MAX_ENTRIES, RECORD_TTL_MS } from "#shared/e2b/builds/records.ts";
import { BuildSlots } from "#shared/e2b/builds/slots.ts";
import { LineSplitter, EnvelopeReader, MAX_ENVELOPE_BYTES, MAX_LINE_BYTES } from "#shared/e2b/builds/envd-client.ts";

describe("BuildLog", () => {
  test("keeps at most the cap, pages by offset and limit, filters by level", () => {
    const log = new BuildLog(5, new FakeClock());
    log.add("base", "info", "a");
    log.add("1", "warn", "b");
    log.add("1", "error", "c");
    log.add("2", "debug", "d");
    log.add("2", "info", "e");
    log.add("2", "info", "dropped");
    log.add("2", "info", "dropped too");
    // The build's own outcome line is kept past the cap, after one note that output was dropped.
    log.add("2", "error", "the outcome", true);
    expect(log.entries.map((e) => e.message)).toEqual(["a", "b", "c", "d", "e", "log limit reached: later output lines are dropped", "the outcome"]);
    expect(log.droppedLines).toBe(2);
    expect(log.page(1, 2, undefined).map((e) => e.message)).toEqual(["b", "c"]);
    expect(log.page(7, undefined, undefined)).toEqual([]);
    expect(log.page(0, undefined, "warn").map((e) => e.message)).toEqual(["b", "c", "log limit reached: later output lines are dropped", "the outcome"]);
    expect(log.page(1, 1, "warn").map((e) => e.message)).toEqual(["c"]);
    expect(log.entries[0]!.step).toBe("base");
    expect(log.entries[0]!.timestamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);
  });

  test("issue 27: once a line is dropped the log is full: a later short line that would fit the bytes is dropped too", () => {
    const log = new BuildLog(100, new FakeClock());
    log.add("1", "info", "short");
    expect(log.full).toBe(false);
    log.add("1", "info", "x".repeat(LOG_MAX_BYTES)); // over the byte bound alone: dropped
    expect(log.full).toBe(true);
    log.add("1", "info", "fits");
    log.add("1", "info", "the outcome", true);
    expect(log.entries.map((e) => e.message)).toEqual(["short", "log limit reached: later output lines are dropped", "the outcome"]);
    expect(log.droppedLines).toBe(2);
  });
});

describe("log memory bounds", () => {
  test("one log holds at most LOG_MAX_BYTES of output, whatever the line cap", () => {
    const log = new BuildLog(1_000_000, new FakeClock());
    const line = "x".repeat(64 * 1024);
    for (let i = 0; i < 1000; i++) log.add("1", "info", line);
    expect(log.bytes).toBeLessThanOrEqual(LOG_MAX_BYTES + 200);
    expect(log.entries.length).toBeLessThan(130);
    expect(log.droppedLines).toBeGreaterThan(800);
  });

  test("all logs share one budget: a finished record is dropped to make room, a running one never", () => {
    const clock = new FakeClock();
    const r = new BuildRecords(1_000_000, clock, 300_000);
    const old = r.add({ ns: "a", name: "t", buildID: "old", tags: [], size: undefined })!;
    old.started = true;
    for (let i = 0; i < 2; i++) old.log.add("1", "info", "y".repeat(50_000));
    r.finish(old, "ready");
    const running = r.add({ ns: "a", name: "t", buildID: "run", tags: [], size: undefined })!;
    running.started = true;
    for (let i = 0; i < 2; i++) running.log.add("1", "info", "z".repeat(50_000));
    // The old record made room for the running one's second line.
    expect(r.get("a", "t", "old")).toBeUndefined();
    expect(running.log.entries).toHaveLength(2);
    // Nothing finished is left to drop: the running log's next line is refused, not the budget broken.
    running.log.add("1", "info", "z".repeat(50_000));
    running.log.add("1", "info", "z".repeat(50_000));
    expect(r.budget.used).toBeLessThanOrEqual(300_000 + 200);
    expect(running.log.droppedLines).toBeGreaterThan(0);
  });
});

describe("log bounds across tenants (issue 17)", () => {
  test("a log's cost counts two bytes per UTF-16 unit", () => {
    const log = new BuildLog(10, new FakeClock());
    log.add("1", "info", "x".repeat(1000));
    expect(log.bytes).toBeGreaterThanOrEqual(2000);
  });

  test("the budget evicts the writer's own finished records first, then the heaviest namespace's, never a light one's", () => {
    const clock = new FakeClock();
    const r = new BuildRecords(1_000_000, clock, 500_000);
    const mk = (ns: string, id: string, lines: number) => {
      const rec = r.add({ ns, name: "t", buildID: id, tags: [], size: undefined })!;
      rec.started = true;
      for (let i = 0; i < lines; i++) rec.log.add("1", "info", "q".repeat(40_000));
      clock.advance(1000);
      return rec;
    };
    // The light tenant finished first (the oldest record of all), the heavy one after.
    r.finish(mk("light", "l1", 1), "ready");
    const h1 = mk("heavy", "h1", 2);
    r.finish(h1, "ready");
    const h2 = mk("heavy", "h2", 2);
    r.finish(h2, "ready");
    // A third tenant's build needs room: the heaviest namespace pays, oldest first; the light record stays.
    mk("third", "x", 2);
    expect(r.get("light", "t", "l1")).toBeDefined();
    expect(r.get("heavy", "t", "h1")).toBeUndefined();
    // The heavy tenant's own next build evicts its own record, not the light one's.
    mk("heavy", "h3", 2);
    expect(r.get("heavy", "t", "h2")).toBeUndefined();
    expect(r.get("light", "t", "l1")).toBeDefined();
  });

  test("a status page without a limit holds at most 1000 entries and about 1 MiB; always one entry", () => {
    const log = new BuildLog(10_000, new FakeClock());
    for (let i = 0; i < 2500; i++) log.add("1", "info", `line ${i}`);
    expect(log.page(0, undefined, undefined)).toHaveLength(PAGE_MAX_ENTRIES);
    expect(log.page(2000, undefined, undefined)).toHaveLength(500);
    expect(log.page(0, 1500, undefined)).toHaveLength(1500);
    const wide = new BuildLog(10_000, new FakeClock());
    for (let i = 0; i < 40; i++) wide.add("1", "info", "w".repeat(64 * 1024));
    const page = wide.page(0, undefined, undefined);
    expect(page.length).toBeGreaterThan(0);
    expect(page.reduce((n, e) => n + e.message.length * 2, 0)).toBeLessThanOrEqual(PAGE_MAX_BYTES);
    const huge = new BuildLog(10, new FakeClock());
    huge.add("1", "info", "h".repeat(600_000));
    expect(huge.page(0, undefined, undefined)).toHaveLength(1);
  });
});

describe("BuildRecords", () => {
  test("finished and never-started records are dropped an hour later; running ones stay", () => {
    const clock = new FakeClock();
    const r = new BuildRecords(10, clock);
    const waiting = r.add({ ns: "a", name: "t", buildID: "1", tags: [], size: undefined })!;
    const running = r.add({ ns: "a", name: "t", buildID: "2", tags: [], size: undefined })!;
    running.started = true;
    const done = r.add({ ns: "a", name: "t", buildID: "3", tags: [], size: undefined })!;
    done.started = true;
    clock.advance(RECORD_TTL_MS / 2);
    r.finish(done, "ready");
    clock.advance(RECORD_TTL_MS / 2);
    expect(r.get("a", "t", "1")).toBeUndefined();
    expect(r.get("a", "t", "2")).toBe(running);
    expect(r.get("a", "t", "3")).toBe(done);
    clock.advance(RECORD_TTL_MS / 2);
    expect(r.get("a", "t", "3")).toBeUndefined();
    expect(waiting.status).toBe("waiting");
  });

  test("a namespace holds at most MAX_RECORDS_PER_NAMESPACE records; another namespace still registers", () => {
    const r = new BuildRecords(10, new FakeClock());
    for (let i = 0; i < MAX_RECORDS_PER_NAMESPACE; i++) expect(r.add({ ns: "greedy", name: "t", buildID: String(i), tags: [], size: undefined })).toBeDefined();
    expect(r.add({ ns: "greedy", name: "t", buildID: "one-more", tags: [], size: undefined })).toBeUndefined();
    expect(r.add({ ns: "other", name: "t", buildID: "1", tags: [], size: undefined })).toBeDefined();
  });

  test("another namespace's build is not found", () => {
    const r = new BuildRecords(10, new FakeClock());
    r.add({ ns: "a", name: "t", buildID: "1", tags: [], size: undefined });
    expect(r.get("b", "t", "1")).toBeUndefined();
  });
});

describe("BuildSlots", () => {
  const slot = (r: ReturnType<BuildSlots["tryAcquire"]>) => {
    if (typeof r !== "function") throw new Error(`no slot: ${JSON.stringify(r)}`);
    return r;
  };
  test("at most `parallel` at once; a release frees one, twice frees one", () => {
    const s = new BuildSlots(4);
    const a = slot(s.tryAcquire("a"));
    const b = slot(s.tryAcquire("b"));
    slot(s.tryAcquire("c"));
    slot(s.tryAcquire("d"));
    expect(s.tryAcquire("e")).toEqual({ kind: "busy" });
    a();
    a();
    expect(s.inUse).toBe(3);
    slot(s.tryAcquire("e"));
    expect(s.tryAcquire("f")).toEqual({ kind: "busy" });
    b();
  });

  test("one namespace gets at most ceil(parallel / 2): another still finds a slot (issue 17)", () => {
    const s = new BuildSlots(3);
    expect(s.share).toBe(2);
    const a1 = slot(s.tryAcquire("a"));
    slot(s.tryAcquire("a"));
    expect(s.tryAcquire("a")).toEqual({ kind: "namespace", share: 2 });
    slot(s.tryAcquire("b"));
    expect(s.inUseBy("a")).toBe(2);
    a1();
    expect(s.inUseBy("a")).toBe(1);
    slot(s.tryAcquire("c"));
    expect(s.tryAcquire("b")).toEqual({ kind: "busy" });
    expect(new BuildSlots(1).share).toBe(1);
  });
});

describe("guest output bounds", () => {
  test("lines split across chunks; a partial line over 64 KiB is flushed", () => {
    const lines: string[] = [];
    const s = new LineSplitter((l) => lines.push(l));
    s.push(Buffer.from("hel"));
    s.push(Buffer.from("lo\r\nwor"));
    s.push(Buffer.from("ld\n"));
    s.push(Buffer.alloc(MAX_LINE_BYTES + 10, "x"));
    expect(lines.slice(0, 2)).toEqual(["hello", "world"]);
    expect(lines[2]!.length).toBe(MAX_LINE_BYTES);
    s.end();
    expect(lines[3]).toBe("x".repeat(10));
    // A long line whose newline arrives in the same read is cut too.
    const more: string[] = [];
    const t = new LineSplitter((l) => more.push(l));
    t.push(Buffer.from(`${"y".repeat(2 * MAX_LINE_BYTES + 5)}\nok\n`));
    expect(more.map((l) => l.length)).toEqual([MAX_LINE_BYTES, MAX_LINE_BYTES, 5, 2]);
    // Multi-byte characters are never split.
    const wide: string[] = [];
    const w = new LineSplitter((l) => wide.push(l));
    w.push(Buffer.from(`${"é".repeat(MAX_LINE_BYTES)}\n`));
    expect(wide.every((l) => Buffer.byteLength(l) <= MAX_LINE_BYTES && !l.includes("\ufffd"))).toBe(true);
    expect(wide.join("")).toBe("é".repeat(MAX_LINE_BYTES));
  });

  test("a Connect envelope larger than the bound is refused before it is buffered", () => {
    const r = new EnvelopeReader();
    const head = Buffer.alloc(5);
    head.writeUInt32BE(MAX_ENVELOPE_BYTES + 1, 1);
    expect(() => r.feed(head)).toThrow(/at most/);
    const ok = new EnvelopeReader();
    const msg = Buffer.from('{"event":{}}');
    const env = Buffer.concat([Buffer.from([0, 0, 0, 0, msg.length]), msg]);
    expect(ok.feed(env.subarray(0, 7))).toEqual([]);
    expect(ok.feed(env.subarray(7))).toEqual([[0, '{"event":{}}']]);
  });
});
