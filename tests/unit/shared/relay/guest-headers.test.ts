// Which request headers reach the guest (docs/envd-relay.md "Framing", RFC 9110 §7.6.1): none the client's
// Connection header names, no hop-by-hop ones, no Proxy-Authorization (this proxy's credential), no e2b API key.
import { expect, test } from "bun:test";
import { connectionOptions, guestRequestHeaders } from "#shared/relay/guest.ts";

test("headers named in Connection, hop-by-hop headers, Proxy-Authorization and X-API-Key are not forwarded", () => {
  const h = new Headers({
    connection: "keep-alive, X-Drop-Me , , upgrade",
    "x-drop-me": "1",
    "keep-alive": "timeout=5",
    "proxy-authorization": "Basic dXNlcjpwYXNz",
    "x-api-key": "e2b_secret",
    te: "trailers",
    "x-access-token": "tok",
    "content-type": "application/json",
  });
  expect(guestRequestHeaders(h)).toEqual({ "x-access-token": "tok", "content-type": "application/json" });
});

test("Connection options are trimmed, lowercased, empty ones dropped", () => {
  expect([...connectionOptions(" Close, X-A,,x-b ")]).toEqual(["close", "x-a", "x-b"]);
  expect(connectionOptions(null).size).toBe(0);
  // The common values come from shared sets (no set built per request): the same contents as the general parse.
  for (const v of ["keep-alive", "Keep-Alive", "close", "Close"]) expect([...connectionOptions(v)]).toEqual([v.toLowerCase()]);
  expect([...connectionOptions("Keep-Alive, X-B")]).toEqual(["keep-alive", "x-b"]);
});

test("a client's Connection: keep-alive still drops only hop-by-hop headers", () => {
  const h = new Headers({ connection: "keep-alive", "keep-alive": "timeout=5", "x-access-token": "tok" });
  expect(guestRequestHeaders(h)).toEqual({ "x-access-token": "tok" });
});
