// The guest output parsers are linear: a guest trickling bytes or sending one large message costs the shared event
// loop time proportional to what it sent (the attacker review's M1: the old parsers were quadratic).
import { describe, expect, test } from "bun:test";
import { EnvelopeReader, LineSplitter, MAX_ENVELOPE_BYTES, MAX_LINE_BYTES, OutputPacer } from "#shared/e2b/builds/guest-output.ts";

/** CPU time (user+system) of `fn` in ms: wall time would count the other processes sharing the machine. */
function cpuMs(fn: () => void): number {
  const before = process.cpuUsage();
  fn();
  const d = process.cpuUsage(before);
  return (d.user + d.system) / 1000;
}

describe("guest output parsers are linear", () => {
  test("a 1 MiB envelope read 256 bytes at a time parses in a small CPU budget", () => {
    const body = Buffer.from(JSON.stringify({ event: { data: { stdout: "x".repeat(MAX_ENVELOPE_BYTES - 40) } } }));
    expect(body.length).toBeLessThanOrEqual(MAX_ENVELOPE_BYTES);
    const env = Buffer.concat([Buffer.from([0]), Buffer.alloc(4), body]);
    env.writeUInt32BE(body.length, 1);
    const r = new EnvelopeReader();
    const got: [number, string][] = [];
    const ms = cpuMs(() => {
      for (let i = 0; i < env.length; i += 256) got.push(...r.feed(env.subarray(i, i + 256)));
    });
    expect(got.length).toBe(1);
    expect(got[0]![1]).toBe(body.toString("utf8"));
    expect(r.pending).toBe(0);
    expect(ms).toBeLessThan(50);
  });

  test("envelopes split anywhere, header included, come out whole and in order", () => {
    const msgs = ["{}", '{"a":1}', "x".repeat(300)];
    const wire = Buffer.concat(msgs.map((m, i) => Buffer.concat([Buffer.from([i === 2 ? 2 : 0, 0, 0, 0, 0]), Buffer.from(m)])).map((b, i) => (b.writeUInt32BE(msgs[i]!.length, 1), b)));
    for (const step of [1, 3, 7, 1000]) {
      const r = new EnvelopeReader();
      const got: [number, string][] = [];
      for (let i = 0; i < wire.length; i += step) got.push(...r.feed(wire.subarray(i, i + step)));
      expect(got).toEqual([[0, "{}"], [0, '{"a":1}'], [2, "x".repeat(300)]]);
    }
  });

  test("a newline-less 256 KiB line pushed 1 byte at a time costs a small CPU budget", () => {
    const lines: string[] = [];
    const s = new LineSplitter((l) => lines.push(l));
    const one = Buffer.from("z");
    const ms = cpuMs(() => {
      for (let i = 0; i < 256 * 1024; i++) s.push(one);
    });
    expect(ms).toBeLessThan(50);
    s.end();
    expect(lines.length).toBe(4);
    expect(lines.every((l) => l === "z".repeat(MAX_LINE_BYTES))).toBe(true);
  });

  test("multi-byte characters trickled one byte at a time are never split", () => {
    const text = `${"é€".repeat(20_000)}\nend\r\n`;
    const bytes = Buffer.from(text);
    const lines: string[] = [];
    const s = new LineSplitter((l) => lines.push(l));
    for (let i = 0; i < bytes.length; i++) s.push(bytes.subarray(i, i + 1));
    s.end();
    expect(lines.every((l) => Buffer.byteLength(l) <= MAX_LINE_BYTES && !l.includes("\ufffd"))).toBe(true);
    expect(lines.slice(0, -1).join("")).toBe("é€".repeat(20_000));
    expect(lines.at(-1)).toBe("end");
  });
});

/** One Connect envelope of `msg` with `flags`. */
function envelopeOf(msg: unknown, flags = 0): Buffer {
  const body = Buffer.from(JSON.stringify(msg));
  const out = Buffer.concat([Buffer.from([flags]), Buffer.alloc(4), body]);
  out.writeUInt32BE(body.length, 1);
  return out;
}

describe("output nobody keeps (issue 27: past the build's log cap)", () => {
  test("with skipOver, long message envelopes are dropped unread, split anywhere; short ones and the end-of-stream come out", () => {
    const big = envelopeOf({ event: { data: { stdout: "x".repeat(64 * 1024) } } });
    const end = envelopeOf({ event: { end: { exitCode: 0, exited: true, status: "exit status 0" } } });
    const trailer = envelopeOf({}, 0x02);
    const wire = Buffer.concat([big, big, end, big, trailer]);
    const r = new EnvelopeReader();
    const got: [number, string][] = [];
    for (let at = 0; at < wire.length; at += 777) got.push(...r.feed(wire.subarray(at, at + 777), 1024));
    expect(r.skipped).toBe(3);
    expect(got.map(([f, t]) => [f, JSON.parse(t)])).toEqual([
      [0, { event: { end: { exitCode: 0, exited: true, status: "exit status 0" } } }],
      [2, {}],
    ]);
    expect(r.pending).toBe(0);
  });

  test("a long end-of-stream envelope is never skipped; an oversized one is still refused", () => {
    const r = new EnvelopeReader();
    const err = envelopeOf({ error: { code: "internal", message: "e".repeat(4096) } }, 0x02);
    expect(r.feed(err, 1024).map(([f]) => f)).toEqual([2]);
    const head = Buffer.from([0, 0, 0, 0, 0]);
    head.writeUInt32BE(MAX_ENVELOPE_BYTES + 1, 1);
    expect(() => new EnvelopeReader().feed(head, 1024)).toThrow(/at most/);
  });

  test("skipping 64 MiB of output costs a small CPU budget (no copy, no decode)", () => {
    const big = envelopeOf({ event: { data: { stdout: "A".repeat(MAX_ENVELOPE_BYTES - 64) } } });
    const r = new EnvelopeReader();
    const ms = cpuMs(() => {
      for (let i = 0; i < 64; i++) for (let at = 0; at < big.length; at += 64 * 1024) r.feed(big.subarray(at, at + 64 * 1024), 1024);
    });
    expect(r.skipped).toBe(64);
    expect(ms).toBeLessThan(250);
  });

  test("the pacer lets a burst through, then asks for waits at its rate", () => {
    let now = 0;
    const p = new OutputPacer(1000, 500, () => now);
    expect(p.spend(500)).toBe(0); // the burst
    expect(p.spend(1000)).toBe(1000); // a second's worth at 1000 B/s
    now = 1000;
    expect(p.spend(0)).toBe(0);
    now = 10_000; // idle: the credit is the burst again, not the whole idle time
    expect(p.spend(500)).toBe(0);
    expect(p.spend(100)).toBe(100);
  });
});
