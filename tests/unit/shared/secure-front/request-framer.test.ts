// The TLS front's request framer: whatever way a client's bytes are split into reads, every request head that goes
// upstream carries the connection line exactly once, right after its request line, and bodies pass byte for byte
// (so the next head is found again); arbitrary bytes never throw and are processed in linear time.
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { internalHeaders, RequestFramer } from "#shared/secure-front/index.ts";

const SECRET = "s3cr3t";
const LINE = `x-sandbox-apiserver-connection: ${SECRET}\r\n`;
const framer = () =>
  new RequestFramer({ secret: SECRET, headers: internalHeaders("sandbox-apiserver"), maxBodyBytes: 1 << 20, isIdentityHeader: (n) => n === "x-remote-user" || n === "x-remote-group" || n.startsWith("x-remote-extra-") });

interface Req {
  method: string;
  path: string;
  headers: [string, string][];
  body?: { chunked: boolean; parts: string[] };
}

const token = fc.stringMatching(/^[a-z][a-z0-9-]{0,10}$/);
const value = fc.stringMatching(/^[a-z0-9 ;=.]{0,20}$/).map((v) => v.trim());
const reqArb: fc.Arbitrary<Req> = fc.record({
  method: fc.constantFrom("GET", "POST", "DELETE"),
  path: fc.stringMatching(/^\/[a-z0-9/]{0,20}$/),
  headers: fc.array(fc.tuple(token.filter((t) => !["content-length", "transfer-encoding"].includes(t) && !t.startsWith("x-remote") && !t.startsWith("x-sandbox")), value), { maxLength: 5 }),
  body: fc.option(fc.record({ chunked: fc.boolean(), parts: fc.array(fc.string({ minLength: 1, maxLength: 40 }), { minLength: 1, maxLength: 4 }) }), { nil: undefined }),
});

/** The request as a client writes it, and as the framer must forward it. */
function wire(r: Req): { sent: string; forwarded: string } {
  const requestLine = `${r.method} ${r.path} HTTP/1.1\r\n`;
  let head = r.headers.map(([k, v]) => `${k}: ${v}\r\n`).join("");
  let body = "";
  if (r.body) {
    const text = r.body.parts.join("");
    if (r.body.chunked) {
      head += "Transfer-Encoding: chunked\r\n";
      body = r.body.parts.map((p) => `${Buffer.byteLength(p, "latin1").toString(16)};ext=1\r\n${p}\r\n`).join("") + "0\r\ntrailer: x\r\n\r\n";
    } else {
      head += `Content-Length: ${Buffer.byteLength(text, "latin1")}\r\n`;
      body = text;
    }
  }
  return { sent: `${requestLine}${head}\r\n${body}`, forwarded: `${requestLine}${LINE}${head}\r\n${body}` };
}

/** Cuts `s` at the given fractions, in order. */
function split(s: string, cuts: number[]): Buffer[] {
  const at = [...new Set(cuts.map((c) => Math.floor(c * s.length)))].sort((a, b) => a - b);
  const out: Buffer[] = [];
  let prev = 0;
  for (const i of [...at, s.length]) {
    if (i > prev) out.push(Buffer.from(s.slice(prev, i), "latin1"));
    prev = i;
  }
  return out;
}

describe("request framing on the TLS front", () => {
  test("any sequence of requests, split anywhere: each head gains the connection line once, bodies pass unchanged", () => {
    fc.assert(
      fc.property(fc.array(reqArb, { minLength: 1, maxLength: 5 }), fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { maxLength: 12 }), (reqs, cuts) => {
        const w = reqs.map(wire);
        const f = framer();
        const out = split(w.map((x) => x.sent).join(""), cuts).map((b) => f.feed(b).toString("latin1")).join("");
        expect(out).toBe(w.map((x) => x.forwarded).join(""));
        expect(f.done).toBe(false);
      }),
      { numRuns: 400 },
    );
  });

  test("a client's copy of an internal header is dropped, and an identity line keeps its commas escaped", () => {
    const f = framer();
    const out = f
      .feed(Buffer.from("GET / HTTP/1.1\r\nx-sandbox-apiserver-connection: forged\r\nX-Remote-Group: team,system:masters\r\nX-Remote-Group: 5%\r\n\r\n", "latin1"))
      .toString("latin1");
    expect(out).toBe(`GET / HTTP/1.1\r\n${LINE}X-Remote-Group: team%2Csystem:masters\r\nX-Remote-Group: 5%25\r\n\r\n`);
  });

  test("arbitrary bytes in arbitrary splits never throw, and a megabyte of them is processed quickly", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 600 }), fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { maxLength: 8 }), (bytes, cuts) => {
        const f = framer();
        for (const b of split(Buffer.from(bytes).toString("latin1"), cuts)) f.feed(b);
      }),
      { numRuns: 500 },
    );
    // A head that never ends: refused at 15 KiB, after which everything is dropped at once.
    const f = framer();
    const started = performance.now();
    for (let i = 0; i < 1024; i++) f.feed(Buffer.alloc(1024, 0x61));
    expect(f.done).toBe(true);
    // A chunked body of a million one-byte chunks: linear, not quadratic.
    const g = framer();
    g.feed(Buffer.from("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", "latin1"));
    const chunk = Buffer.from("1\r\nz\r\n".repeat(10_000), "latin1");
    for (let i = 0; i < 100; i++) g.feed(chunk);
    expect(g.done).toBe(false);
    expect(performance.now() - started).toBeLessThan(5_000);
  });

  test("a malformed chunk size breaks the connection instead of guessing", () => {
    for (const bad of ["-6\r\n", "zz\r\n", "1\r\nab\r\n", `${"f".repeat(13)}\r\n`]) {
      const f = framer();
      f.feed(Buffer.from(`POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n${bad}`, "latin1"));
      expect(f.broken).toBe(true);
    }
  });
});
