// The one HTTP/1.1 framing parser for guest bytes (docs/envd-relay.md "Framing"): issue 17's hostile inputs end in
// a FramingError at once, valid replies of every framing round-trip exactly in any split of their bytes, and
// arbitrary bytes in arbitrary splits finish within a time bound with nothing thrown but FramingError. The runs
// that could loop go through a Worker, so a parser that never returns fails by a deadline instead of hanging.
import { afterAll, describe, expect, test } from "bun:test";
import fc from "fast-check";
import { ChunkedDecoder, FramingError, ResponseHeadReader, WholeReplyReader, limits } from "#shared/relay/framing/index.ts";
import { runChunks, split } from "./framing-run.ts";
import { validReply } from "./framing-arbitraries.ts";
import type { Job, JobResult } from "./framing.worker.ts";

const workers: Worker[] = [];
afterAll(() => workers.forEach((w) => w.terminate()));

/** Run a job in a fresh Worker; a job still running after `deadlineMs` is stopped and the test fails. */
function inWorker(job: Job, deadlineMs: number): Promise<JobResult> {
  const w = new Worker(new URL("./framing.worker.ts", import.meta.url).href);
  workers.push(w);
  return new Promise<JobResult>((resolve, reject) => {
    const timer = setTimeout(() => {
      w.terminate();
      reject(new Error(`the parser did not return within ${deadlineMs} ms`));
    }, deadlineMs);
    w.onmessage = (e: MessageEvent<JobResult>) => {
      clearTimeout(timer);
      w.terminate();
      resolve(e.data);
    };
    w.onerror = (e) => {
      clearTimeout(timer);
      reject(new Error(e.message));
    };
    w.postMessage(job);
  });
}

const bytes = (s: string) => Array.from(Buffer.from(s, "latin1"));
const run = (s: string, method = "GET") => runChunks([Buffer.from(s, "latin1")], method);
const refused = (s: string) => {
  const o = run(s);
  expect(o).toMatchObject({ ok: false, framing: true });
  return o.ok ? "" : o.message;
};
const CHUNKED = "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n";

describe("issue 17 case 1 and 2: a negative chunk size", () => {
  test("the body `1\\r\\nZ\\r\\n-6\\r\\nQ` is a FramingError within a second, not an endless loop", async () => {
    const r = await inWorker({ kind: "chunks", chunks: [bytes(`${CHUNKED}1\r\nZ\r\n-6\r\nQ`)] }, 10_000);
    expect(r.kind === "chunks" && r.outcome).toEqual({ ok: false, framing: true, message: "chunk size is not a hex number" });
    expect(r.kind === "chunks" && r.ms).toBeLessThan(1000);
  }, 15_000);

  test("the same bytes one at a time", async () => {
    const wire = bytes(`${CHUNKED}1\r\nZ\r\n-6\r\nQ`);
    const r = await inWorker({ kind: "chunks", chunks: wire.map((b) => [b]) }, 10_000);
    expect(r.kind === "chunks" && r.outcome).toMatchObject({ ok: false, framing: true });
  }, 15_000);
});

describe("chunk sizes are unsigned hex with bounded digits", () => {
  test.each(["-6", "+5", "0x10", " 5", "", "g", "5 5"])("size %p is refused", (size) => {
    expect(refused(`${CHUNKED}${size}\r\nhello\r\n0\r\n\r\n`)).toMatch(/chunk size|junk after/);
  });
  test("more than the digit bound is refused (leading zeros count)", () => {
    expect(refused(`${CHUNKED}${"0".repeat(limits.MAX_CHUNK_SIZE_DIGITS)}1\r\nZ\r\n0\r\n\r\n`)).toContain("hex digits");
    expect(run(`${CHUNKED}${"0".repeat(limits.MAX_CHUNK_SIZE_DIGITS - 1)}1\r\nZ\r\n0\r\n\r\n`)).toEqual({ ok: true, status: 200, body: "Z" });
  });
  test("upper and lower case hex, whitespace before an extension, bounded extensions", () => {
    expect(run(`${CHUNKED}A\r\n0123456789\r\nb ;x=1\r\nabcdefghijk\r\n0\r\n\r\n`)).toEqual({ ok: true, status: 200, body: "0123456789abcdefghijk" });
    expect(refused(`${CHUNKED}1;${"x".repeat(limits.MAX_CHUNK_EXT_BYTES + 1)}\r\nZ\r\n0\r\n\r\n`)).toContain("extensions longer");
    expect(refused(`${CHUNKED}1;a\x01\r\nZ\r\n0\r\n\r\n`)).toContain("control character");
  });
  test("every CRLF is checked", () => {
    expect(refused(`${CHUNKED}1\r\nZX\r\n0\r\n\r\n`)).toContain("not followed by CRLF");
    expect(refused(`${CHUNKED}1\nZ\r\n0\r\n\r\n`)).toContain("chunk size is not a hex number");
    expect(refused(`${CHUNKED}1\rZ\r\n0\r\n\r\n`)).toContain("not ended by CRLF");
    expect(refused(`${CHUNKED}0\r\n\n`)).toContain("malformed trailer line");
    expect(refused(`${CHUNKED}0\r\n\rX`)).toContain("not ended by CRLF");
  });
  test("trailers are bounded, checked, and discarded", () => {
    expect(run(`${CHUNKED}1\r\nZ\r\n0\r\nx-t: 1\r\n\r\n`)).toEqual({ ok: true, status: 200, body: "Z" });
    expect(refused(`${CHUNKED}0\r\nx-t: 1\r\n folded\r\n\r\n`)).toContain("obs-fold");
    expect(refused(`${CHUNKED}0\r\nx-t: 1\n\r\n`)).toContain("bare LF");
    expect(refused(`${CHUNKED}0\r\nx-t: ${"v".repeat(limits.MAX_TRAILER_BYTES)}\r\n\r\n`)).toContain("trailer section larger");
  });
  test("a chunk size may not move the cursor: the decoder consumes every byte it is given exactly once", () => {
    const d = new ChunkedDecoder();
    const seen: string[] = [];
    d.feed(Buffer.from("3\r\nabc\r\n"), (s) => seen.push(s.toString()));
    expect(() => d.feed(Buffer.from("-3\r\n"), () => undefined)).toThrow(FramingError);
    expect(seen).toEqual(["abc"]);
  });
});

describe("Content-Length is digits only, once", () => {
  test.each(["-6", "abc", "", "5, 5", "+5", "0x5", "1e3", "5.0", "9".repeat(16)])("value %p is refused", (v) => {
    expect(refused(`HTTP/1.1 200 OK\r\ncontent-length: ${v}\r\n\r\nhello`)).toContain("Content-Length");
  });
  test("a duplicate, even of the same value, or one next to Transfer-Encoding, is refused", () => {
    expect(refused("HTTP/1.1 200 OK\r\ncontent-length: 5\r\nContent-Length: 5\r\n\r\nhello")).toBe("duplicate Content-Length");
    expect(refused("HTTP/1.1 200 OK\r\ncontent-length: 5\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")).toBe("both Content-Length and Transfer-Encoding");
  });
  test("whitespace around the value is not part of it", () => {
    expect(run("HTTP/1.1 200 OK\r\ncontent-length: \t5 \r\n\r\nhello")).toEqual({ ok: true, status: 200, body: "hello" });
  });
});

describe("the response head", () => {
  test.each([
    ["HTTP/1.1 99 Low\r\n\r\n", "status line"],
    ["HTTP/1.1 099 Low\r\n\r\n", "outside 100..599"],
    ["HTTP/1.1 600 High\r\n\r\n", "outside 100..599"],
    ["HTTP/1.1 2000 OK\r\n\r\n", "status line"],
    ["HTTP/2 200 OK\r\n\r\n", "status line"],
    ["HTTP/1.1 20x OK\r\n\r\n", "status line"],
    ["ICY 200 OK\r\n\r\n", "status line"],
    ["\r\n\x01\0", "status line"],
    ["HTTP/1.1 200 OK\r\nx: a\r\n folded\r\n\r\n", "obs-fold"],
    ["HTTP/1.1 200 OK\nx: a\r\n\r\n", "bare LF"],
    ["HTTP/1.1 200 OK\r\nx: a\n\n", "bare LF"],
    ["HTTP/1.1 200 OK\r\nx: a\rb\r\n\r\n", "bare CR"],
    ["HTTP/1.1 200 OK\r\nx: a\0\r\n\r\n", "NUL"],
    ["HTTP/1.1 200 OK\r\nx: a\x01\r\n\r\n", "control character"],
    ["HTTP/1.1 200 OK\r\nx : a\r\n\r\n", "malformed header"],
    ["HTTP/1.1 200 OK\r\n: a\r\n\r\n", "malformed header"],
    ["HTTP/1.1 200 OK\r\ntransfer-encoding: gzip, chunked\r\n\r\n", "unsupported Transfer-Encoding"],
    ["HTTP/1.1 200 OK\r\ntransfer-encoding: identity\r\n\r\n", "unsupported Transfer-Encoding"],
    ["HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ntransfer-encoding: chunked\r\n\r\n", "duplicate Transfer-Encoding"],
    ["HTTP/1.1 101 Switching Protocols\r\nupgrade: x\r\n\r\n", "101"],
  ])("%p is refused (%s)", (head, why) => {
    expect(refused(head)).toContain(why);
  });
  test("the head size and header count are bounded, across interim heads too", () => {
    expect(refused(`HTTP/1.1 200 OK\r\nx: ${"a".repeat(limits.MAX_HEAD_BYTES)}\r\n\r\n`)).toContain("larger than");
    expect(refused(`HTTP/1.1 200 OK\r\n${"x: a\r\n".repeat(limits.MAX_HEADER_COUNT + 1)}\r\n`)).toContain("header lines");
    expect(refused(`${"HTTP/1.1 103 Early Hints\r\nlink: </a>\r\n\r\n".repeat(limits.MAX_INTERIM_HEADS + 1)}HTTP/1.1 200 OK\r\n\r\n`)).toContain("interim");
  });
  test("a head that never ends is refused at the bound, fed one byte at a time in linear time", () => {
    const r = new ResponseHeadReader("GET");
    const t0 = performance.now();
    const line = Buffer.from("HTTP/1.1 200 OK\r\nx-slow: ");
    let err: unknown;
    try {
      for (const b of line) r.feed(Buffer.from([b]));
      for (let i = 0; i < limits.MAX_HEAD_BYTES; i++) r.feed(Buffer.from("a"));
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(FramingError);
    expect(performance.now() - t0).toBeLessThan(2000);
  });
  test("interim 1xx heads are skipped; HEAD, 204 and 304 have no body whatever their length says", () => {
    expect(run("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early\r\nlink: </a>\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nhi")).toEqual({ ok: true, status: 200, body: "hi" });
    expect(run("HTTP/1.1 200 OK\r\ncontent-length: 9\r\n\r\n", "HEAD")).toEqual({ ok: true, status: 200, body: "" });
    expect(run("HTTP/1.1 204 No Content\r\n\r\n")).toEqual({ ok: true, status: 204, body: "" });
    expect(run("HTTP/1.1 304 Not Modified\r\ncontent-length: 10\r\n\r\n")).toEqual({ ok: true, status: 304, body: "" });
  });
  test("a status line without a reason phrase, HTTP/1.0, and obs-text in values are accepted", () => {
    expect(run("HTTP/1.1 200\r\ncontent-length: 0\r\n\r\n")).toEqual({ ok: true, status: 200, body: "" });
    expect(run("HTTP/1.0 200 OK\r\nx: caf\xe9\r\n\r\nrest")).toEqual({ ok: true, status: 200, body: "rest" });
  });
});

describe("a reply that closes early is an error, not a truncated success", () => {
  test.each([
    ["Content-Length not reached", "HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nhello", "bytes before the end"],
    ["chunked without the last chunk", `${CHUNKED}5\r\nhello\r\n`, "last chunk"],
    ["chunked mid-chunk", `${CHUNKED}5\r\nhel`, "last chunk"],
    ["chunked before the final CRLF", `${CHUNKED}0\r\n`, "last chunk"],
    ["mid-head", "HTTP/1.1 200 OK\r\nx: a", "middle of the response head"],
    ["no head at all", "", "before a response head"],
  ])("%s", (_what, wire, message) => {
    expect(refused(wire)).toContain(message);
  });
  test("a close-delimited body ends with the close", () => {
    expect(run("HTTP/1.1 200 OK\r\n\r\nall of it")).toEqual({ ok: true, status: 200, body: "all of it" });
  });
  test("a whole reply's body is capped", () => {
    const r = new WholeReplyReader("GET", 4);
    expect(() => r.feed(Buffer.from("HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello"))).toThrow("larger than 4 bytes");
  });
});

describe("properties", () => {
  test("valid replies of every framing round-trip exactly, in any split of their bytes", () => {
    fc.assert(
      fc.property(validReply, fc.array(fc.nat(), { maxLength: 10 }), (v, cuts) => {
        const got = runChunks(split(v.wire, cuts), v.method);
        expect(got).toEqual({ ok: true, status: v.status, body: Buffer.from(v.body).toString("latin1") });
      }),
      { numRuns: 500 },
    );
  });

  test("arbitrary bytes in arbitrary splits: done within the time bound, only FramingError, the same outcome for every split", async () => {
    const seed = Date.now() | 0;
    const r = await inWorker({ kind: "fuzz", runs: 3000, seed }, 60_000);
    expect(r.kind === "fuzz" && r.failure).toBeNull();
    // Each input is at most a few KiB and parses in microseconds: the slowest one, timed again, taking longer than
    // this is super-linear work, not load.
    expect(r.kind === "fuzz" && r.slowestMs).toBeLessThan(100);
  }, 90_000);
});
