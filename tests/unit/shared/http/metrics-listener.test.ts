// shared/http/metrics-listener.ts: a listener that serves only GET /metrics, from every registry it is given.
import { afterAll, expect, test } from "bun:test";
import { serveMetrics } from "#shared/http/index.ts";
import { createLogger } from "#shared/log/index.ts";
import { Counter, Registry } from "#shared/metrics/index.ts";

const a = new Registry();
const b = new Registry();
new Counter({ name: "first_total", help: "a", registers: [a] }).inc(2);
new Counter({ name: "second_total", help: "b", registers: [b] }).inc(3);
const server = serveMetrics({ address: "127.0.0.1:0", registries: [a, b], log: createLogger({ level: "error" }) });
afterAll(() => server.stop(true));
const url = (path: string) => `http://127.0.0.1:${server.port}${path}`;

test("GET /metrics serves every registry's series in the Prometheus text format", async () => {
  const r = await fetch(url("/metrics"));
  expect(r.status).toBe(200);
  expect(r.headers.get("content-type")).toContain("text/plain");
  const text = await r.text();
  expect(text).toContain("first_total 2");
  expect(text).toContain("second_total 3");
});

test("any other path is a 404 envelope, another method on /metrics a 405", async () => {
  const other = await fetch(url("/healthz"));
  expect([other.status, ((await other.json()) as { code: number }).code]).toEqual([404, 404]);
  const post = await fetch(url("/metrics"), { method: "POST" });
  expect([post.status, ((await post.json()) as { code: number }).code]).toEqual([405, 405]);
});
