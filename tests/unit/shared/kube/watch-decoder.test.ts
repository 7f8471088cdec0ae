import { expect, test } from "bun:test";
import { decodeWatchStream, LineSplitter, parseWatchLine, WatchDecodeError } from "#shared/kube/watch-decoder.ts";

function streamOf(chunks: (string | Uint8Array)[]): ReadableStream<Uint8Array> {
  const enc = new TextEncoder();
  return new ReadableStream({
    start(c) {
      for (const ch of chunks) c.enqueue(typeof ch === "string" ? enc.encode(ch) : ch);
      c.close();
    },
  });
}
async function collect<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of it) out.push(x);
  return out;
}

test("the splitter keeps partial lines across chunks and skips blank lines", () => {
  const s = new LineSplitter();
  expect(s.push('{"a"')).toEqual([]);
  expect(s.push(':1}\n\n{"b":2}\n{"c"')).toEqual(['{"a":1}', '{"b":2}']);
  expect(s.push(":3}")).toEqual([]);
  expect(s.end()).toEqual(['{"c":3}']);
});

test("events split at every byte boundary, including inside a multi-byte character, decode intact", async () => {
  const text =
    JSON.stringify({ type: "ADDED", object: { metadata: { name: "ä-ü-€-😀" } } }) +
    "\n" +
    JSON.stringify({ type: "BOOKMARK", object: { metadata: { resourceVersion: "42" } } }) +
    "\n";
  const bytes = new TextEncoder().encode(text);
  const oneByteChunks = Array.from(bytes, (b) => new Uint8Array([b]));
  const evs = await collect(decodeWatchStream(streamOf(oneByteChunks)));
  expect(evs).toEqual([
    { type: "ADDED", object: { metadata: { name: "ä-ü-€-😀" } } },
    { type: "BOOKMARK", object: { metadata: { resourceVersion: "42" } } },
  ]);
});

test("a last event without a trailing newline is still delivered", async () => {
  const evs = await collect(decodeWatchStream(streamOf(['{"type":"DELETED","object":{}}'])));
  expect(evs).toEqual([{ type: "DELETED", object: {} }]);
});

test("an ERROR event carries the Status", () => {
  const e = parseWatchLine('{"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired"}}');
  expect(e.type).toBe("ERROR");
  expect((e.object as { code: number }).code).toBe(410);
});

test.each(["not json", '{"type":"WHAT","object":{}}', '{"object":{}}', '{"type":"ADDED"}', "[1,2]"])("%p is rejected", (line) => {
  expect(() => parseWatchLine(line)).toThrow(WatchDecodeError);
});
