// fast-check arbitraries for HTTP/1.1 replies: hostile byte soup biased toward the grammar's tokens (so runs reach
// deep parser states), and valid encodings of arbitrary bodies.
import fc from "fast-check";

const te = new TextEncoder();
const FRAGMENTS = [
  "HTTP/1.1 200 OK\r\n",
  "HTTP/1.0 204 No Content\r\n",
  "HTTP/1.1 100 Continue\r\n\r\n",
  "HTTP/1.1 101 Switching Protocols\r\n",
  "HTTP/1.1 600 X\r\n",
  "HTTP/1.1 099 X\r\n",
  "transfer-encoding: chunked\r\n",
  "Transfer-Encoding: gzip, chunked\r\n",
  "content-length: 5\r\n",
  "content-length: -6\r\n",
  "content-length: 5, 5\r\n",
  "x: a\r\n",
  " folded\r\n",
  "\r\n",
  "\n",
  "\r",
  "\0",
  "-6\r\n",
  "0x10\r\n",
  "1\r\nZ\r\n",
  "ffffffffffffff\r\n",
  "0\r\n\r\n",
  "0\r\nx-t: 1\r\n\r\n",
  ";ext=1",
  "a",
  "Q",
];
const fragment = fc.oneof(fc.constantFrom(...FRAGMENTS.map((f) => te.encode(f))), fc.uint8Array({ maxLength: 12 }));
const soup = fc.array(fragment, { maxLength: 40 }).map((fs) => Uint8Array.from(Buffer.concat(fs)));
const heads = fc.constantFrom("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n", "HTTP/1.1 200 OK\r\ncontent-length: 7\r\n\r\n", "HTTP/1.1 200 OK\r\n\r\n").map((h) => te.encode(h));

/** Bytes a hostile guest might send: soup, or a valid head followed by soup (to reach the body decoders). */
export const hostileReply = fc.oneof(
  soup,
  fc.tuple(heads, soup).map(([h, s]) => Uint8Array.from(Buffer.concat([h, s]))),
);

export interface ValidReply {
  wire: Uint8Array;
  status: number;
  body: Uint8Array;
  method: string;
}

const bodyParts = fc.array(fc.uint8Array({ maxLength: 200 }), { maxLength: 8 });

function chunked(parts: Uint8Array[], ext: boolean, trailers: boolean, upper: boolean, zeros: number): Buffer {
  const out: Buffer[] = [];
  for (const p of parts) {
    if (p.length === 0) continue;
    const hex = p.length.toString(16);
    out.push(Buffer.from(`${"0".repeat(zeros)}${upper ? hex.toUpperCase() : hex}${ext ? ';x=1;name="v a"' : ""}\r\n`), Buffer.from(p), Buffer.from("\r\n"));
  }
  out.push(Buffer.from(`0\r\n${trailers ? "x-trailer: 1\r\nx-other:\tv\r\n" : ""}\r\n`));
  return Buffer.concat(out);
}

/** A valid reply of every framing the parser supports, an interim 100 head first or not. */
export const validReply: fc.Arbitrary<ValidReply> = fc
  .record({
    parts: bodyParts,
    kind: fc.constantFrom("length", "chunked", "close", "none"),
    interim: fc.boolean(),
    ext: fc.boolean(),
    trailers: fc.boolean(),
    upper: fc.boolean(),
    zeros: fc.nat({ max: 3 }),
    status: fc.constantFrom(200, 201, 206, 404, 500, 599),
    reason: fc.constantFrom("", " OK", " Some Reason", " \xe9t\xe9"),
  })
  .map(({ parts, kind, interim, ext, trailers, upper, zeros, status, reason }) => {
    const body = Buffer.concat(parts.map((p) => Buffer.from(p)));
    const head = (framing: string) => Buffer.from(`${interim ? "HTTP/1.1 100 Continue\r\n\r\n" : ""}HTTP/1.1 ${status}${reason}\r\nx-a: 1\r\nX-Mixed-Case:  spaced value \r\n${framing}\r\n`, "latin1");
    switch (kind) {
      case "length":
        return { wire: Uint8Array.from(Buffer.concat([head(`content-length: ${body.length}\r\n`), body])), status, body: Uint8Array.from(body), method: "GET" };
      case "chunked":
        return { wire: Uint8Array.from(Buffer.concat([head("Transfer-Encoding: Chunked\r\n"), chunked(parts, ext, trailers, upper, zeros)])), status, body: Uint8Array.from(body), method: "POST" };
      case "close":
        return { wire: Uint8Array.from(Buffer.concat([head(""), body])), status, body: Uint8Array.from(body), method: "GET" };
      default:
        // HEAD: the length describes a body that is not sent.
        return { wire: Uint8Array.from(head(`content-length: ${body.length}\r\n`)), status, body: new Uint8Array(0), method: "HEAD" };
    }
  });
