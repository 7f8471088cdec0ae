// The relay's HTTP/1.1 guest leg on a fake wire (docs/envd-relay.md "Framing"): a framing violation before the
// response head rejects (the proxy answers 502), after it errors the body stream (the client sees a reset), and
// either way tears down only this exchange's tunnel. A head that is started but not finished hits the head deadline.
import { expect, test } from "bun:test";
import fc from "fast-check";
import { FakeClock } from "#shared/clock/index.ts";
import { FramingError } from "#shared/relay/framing/index.ts";
import { startHttp1, type GuestWire, type Http1Options } from "#shared/relay/h1.ts";

function fakeWire(): GuestWire & { written: string } {
  const w = {
    written: "",
    destroyed: false,
    write(d: Buffer | string) {
      w.written += d.toString();
      return true;
    },
    drained: () => Promise.resolve(),
    pause: () => undefined,
    resume: () => undefined,
    destroy() {
      w.destroyed = true;
    },
  };
  return w;
}

function exchange(o: Http1Options = {}, method = "GET") {
  const wire = fakeWire();
  const { response, events } = startHttp1(
    wire,
    { method, path: "/x", authority: "3000-sb-x.example", headers: {}, body: null, onBytesIn: () => undefined, onBytesOut: () => undefined, signal: new AbortController().signal },
    o,
  );
  const send = (s: string) => events.data(Buffer.from(s, "latin1"));
  return { wire, response, events, send };
}

test("issue 17 case 1: a negative chunk size after the head errors the body stream and tears the tunnel down", async () => {
  const x = exchange();
  x.send("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n1\r\nZ\r\n-6\r\nQ");
  const res = await x.response;
  expect(res.status).toBe(200);
  const err = await res.text().catch((e: unknown) => e);
  expect(err).toBeInstanceOf(FramingError);
  expect(x.wire.destroyed).toBe(true);
});

test.each([
  ["a negative Content-Length", "HTTP/1.1 200 OK\r\ncontent-length: -6\r\n\r\nQ"],
  ["a non-numeric Content-Length", "HTTP/1.1 200 OK\r\ncontent-length: abc\r\n\r\nQ"],
  ["conflicting Content-Lengths", "HTTP/1.1 200 OK\r\ncontent-length: 1\r\ncontent-length: 2\r\n\r\nQ"],
  ["status 99", "HTTP/1.1 099 Low\r\ncontent-length: 0\r\n\r\n"],
  ["status 600", "HTTP/1.1 600 High\r\ncontent-length: 0\r\n\r\n"],
  ["an obs-fold", "HTTP/1.1 200 OK\r\nx: a\r\n b\r\ncontent-length: 0\r\n\r\n"],
  ["Transfer-Encoding gzip", "HTTP/1.1 200 OK\r\ntransfer-encoding: gzip\r\n\r\n"],
])("%s before the body rejects with the protocol error (the proxy's 502) and tears the tunnel down", async (_what, wire) => {
  const x = exchange();
  x.send(wire);
  expect(await x.response.catch((e: unknown) => e)).toBeInstanceOf(FramingError);
  expect(x.wire.destroyed).toBe(true);
});

test("a guest that closes mid-body errors the stream: Content-Length short, chunked unterminated", async () => {
  for (const wire of ["HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nhello", "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n"]) {
    const x = exchange();
    x.send(wire);
    const res = await x.response;
    x.events.end();
    expect(await res.text().catch((e: unknown) => e)).toBeInstanceOf(FramingError);
  }
});

test("a head started and not finished within the head deadline rejects (slowloris); a finished one cancels it", async () => {
  const clock = new FakeClock();
  const slow = exchange({ clock, headDeadlineMs: 10_000 });
  slow.send("HTTP/1.1 200 OK\r\n");
  clock.advance(9_000);
  slow.send("x-slow: 1\r\n");
  clock.advance(1_000);
  const err = await slow.response.catch((e: unknown) => e);
  expect(err).toBeInstanceOf(FramingError);
  expect((err as Error).message).toContain("no complete response head within 10000 ms");
  expect(slow.wire.destroyed).toBe(true);

  const fine = exchange({ clock, headDeadlineMs: 10_000 });
  fine.send("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n");
  clock.advance(60_000);
  fine.send("ok");
  expect(await (await fine.response).text()).toBe("ok");
});

test("each complete interim head restarts the head deadline: 100 Continue, then a long upload, then the answer", async () => {
  const clock = new FakeClock();
  const x = exchange({ clock, headDeadlineMs: 10_000 });
  x.send("HTTP/1.1 100 Continue\r\n\r\n");
  clock.advance(60_000);
  x.send("HTTP/1.1 200 OK\r\n");
  clock.advance(5_000);
  x.send("content-length: 2\r\n\r\nok");
  expect(await (await x.response).text()).toBe("ok");

  const stalled = exchange({ clock, headDeadlineMs: 10_000 });
  stalled.send("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n");
  clock.advance(10_000);
  expect(await stalled.response.catch((e: unknown) => e)).toBeInstanceOf(FramingError);
});

test("response headers named by the guest's Connection header and hop-by-hop ones do not reach the client", async () => {
  const x = exchange();
  x.send("HTTP/1.1 200 OK\r\nconnection: close, x-internal\r\nx-internal: secret\r\nkeep-alive: 5\r\nx-public: 1\r\ncontent-length: 0\r\n\r\n");
  const res = await x.response;
  expect(res.headers.get("x-internal")).toBeNull();
  expect(res.headers.get("keep-alive")).toBeNull();
  expect(res.headers.get("x-public")).toBe("1");
});

test("any split of a valid chunked reply streams the exact body", async () => {
  await fc.assert(
    fc.asyncProperty(fc.uint8Array({ maxLength: 400 }), fc.array(fc.nat(), { maxLength: 8 }), async (body, cuts) => {
      const x = exchange();
      const half = Math.floor(body.length / 2);
      const wire = Buffer.concat([
        Buffer.from("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"),
        ...[body.subarray(0, half), body.subarray(half)].filter((p) => p.length).flatMap((p) => [Buffer.from(`${p.length.toString(16)}\r\n`), Buffer.from(p), Buffer.from("\r\n")]),
        Buffer.from("0\r\n\r\n"),
      ]);
      const points = [...new Set(cuts.map((c) => c % (wire.length + 1)))].sort((a, b) => a - b);
      let prev = 0;
      for (const p of [...points, wire.length]) {
        x.events.data(wire.subarray(prev, p));
        prev = p;
      }
      const got = new Uint8Array(await (await x.response).arrayBuffer());
      expect(Buffer.compare(Buffer.from(got), Buffer.from(body))).toBe(0);
    }),
    { numRuns: 100 },
  );
});

test("issue 17: a body of 1-byte chunks queues one entry per guest read, counted by its bytes, not one per chunk", async () => {
  const queued: number[] = [];
  const wire = fakeWire();
  const { response, events } = startHttp1(wire, {
    method: "GET",
    path: "/x",
    authority: "3000-sb-x.example",
    headers: {},
    body: null,
    onBytesIn: () => undefined,
    onBytesOut: () => undefined,
    queued: (n) => (queued.push(n), true),
    signal: new AbortController().signal,
  });
  events.data(Buffer.from("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n", "latin1"));
  const res = await response;
  const read = Buffer.from("1\r\nx\r\n".repeat(4096), "latin1"); // one 24 KiB guest read, 4096 bytes of body
  for (let i = 0; i < 16; i++) events.data(read);
  events.data(Buffer.from("0\r\n\r\n", "latin1"));
  // One report per read: the queue holds 16 entries of 4096 bytes each (before: 65,536 entries of 1 byte).
  expect(queued.at(-1)).toBe(16 * 4096);
  const reader = res.body!.getReader();
  const sizes: number[] = [];
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    sizes.push(value.byteLength);
  }
  expect(sizes).toEqual(Array(16).fill(4096));
});

test("a body framing error is reported once (the relay's metric and warn line); a head error or a clean end is not", async () => {
  const seen: Error[] = [];
  const start = () => {
    const wire = fakeWire();
    const { response, events } = startHttp1(wire, {
      method: "GET",
      path: "/x",
      authority: "3000-sb-x.example",
      headers: {},
      body: null,
      onBytesIn: () => undefined,
      onBytesOut: () => undefined,
      signal: new AbortController().signal,
      onBodyFramingError: (err) => seen.push(err),
    });
    return { response, events, send: (s: string) => events.data(Buffer.from(s, "latin1")) };
  };
  const broken = start();
  broken.send("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n1\r\nZ\r\n-6\r\nQ");
  broken.events.end();
  broken.events.close();
  await (await broken.response).text().catch(() => undefined);
  expect(seen).toHaveLength(1);
  expect(seen[0]).toBeInstanceOf(FramingError);

  const badHead = start();
  badHead.send("HTTP/1.1 099 Low\r\ncontent-length: 0\r\n\r\n");
  await badHead.response.catch(() => undefined);
  const clean = start();
  clean.send("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok");
  expect(await (await clean.response).text()).toBe("ok");
  const cut = start();
  cut.send("HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nhello");
  cut.events.close();
  await (await cut.response).text().catch(() => undefined);
  // Only the broken body above: a head error is the proxy's to count, and a tunnel that drops is not the guest's framing.
  expect(seen).toHaveLength(1);
});
