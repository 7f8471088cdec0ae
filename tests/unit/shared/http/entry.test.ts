// shared/http/entry.ts: the request shapes refused before any handler, the guard around a fetch handler, and the
// `error` handler that turns a throw into one log line and an envelope naming nothing of the code.
import { afterAll, describe, expect, test } from "bun:test";
import { codeMessageEnvelope, guardRequests, requestTargetProblem, uncaughtErrorHandler } from "#shared/http/index.ts";
import { createLogger } from "#shared/log/index.ts";

describe("requestTargetProblem", () => {
  const rows: Array<[string, string, number | undefined]> = [
    ["GET", "http://h/a/b?x=%zz", undefined], // a query is the handler's to read: URLSearchParams takes any escape
    ["GET", "http://h/%41%ff", undefined], // well-formed escapes, even of a non-UTF-8 byte, are a guest's business
    ["POST", "http://[::1]:8080/x", undefined],
    ["CONNECT", "127.0.0.1:443", 405], // authority form, as Bun hands it over
    ["CONNECT", "http://h/x", 405],
    ["GET", "/a", 400], // a Host that made no URL: Bun leaves the bare path
    ["GET", "http://[::1/a", 400],
    ["GET", "http://h/a%zz", 400],
    ["GET", "http://h/a%4", 400],
    ["GET", "http://h/%", 400],
  ];
  for (const [method, url, status] of rows) {
    test(`${method} ${url} -> ${status ?? "served"}`, () => {
      expect(requestTargetProblem(method, url)?.status).toBe(status as 400 | 405 | undefined);
    });
  }
});

test("guardRequests answers a refused shape with the envelope and never calls the handler", async () => {
  let calls = 0;
  const fetch = guardRequests(codeMessageEnvelope, (_req: Request, _s: undefined) => {
    calls++;
    return new Response("handled");
  });
  const refused = await fetch(new Request("http://h/a%zz"), undefined);
  expect([refused.status, await refused.json()]).toEqual([400, { code: 400, message: "malformed percent escape in the request path" }]);
  expect(calls).toBe(0);
  expect(await (await fetch(new Request("http://h/ok"), undefined)).text()).toBe("handled");
  expect(calls).toBe(1);
});

describe("a Bun.serve with development: false and uncaughtErrorHandler", () => {
  const lines: string[] = [];
  const log = createLogger({ level: "info", destination: { write: (l: string) => lines.push(l) } });
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    development: false,
    error: uncaughtErrorHandler(log, codeMessageEnvelope),
    fetch: guardRequests(codeMessageEnvelope, () => {
      throw new Error(`boom in ${import.meta.path}`);
    }),
  });
  afterAll(() => server.stop(true));

  test("a throw is a 500 envelope with nothing of the code, and one structured log line with the error", async () => {
    const r = await fetch(`http://127.0.0.1:${server.port}/x`);
    const body = await r.text();
    expect(r.status).toBe(500);
    expect(r.headers.get("content-type")).toContain("application/json");
    expect(JSON.parse(body)).toEqual({ code: 500, message: "internal error" });
    expect(body).not.toContain(import.meta.dir);
    expect(lines).toHaveLength(1);
    const line = JSON.parse(lines[0]!) as { level: string; msg: string; err: { message: string } };
    expect([line.level, line.msg, line.err.message]).toEqual(["error", "request handler threw; answered 500", `boom in ${import.meta.path}`]);
  });
});
