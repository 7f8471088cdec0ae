// /healthz, /livez, /readyz, /metrics and /debug/pprof (docs/serving.md "Observability"). Health answers like the
// generic apiserver: `ok`, or with `?verbose` one `[+]check ok` line per check; /readyz fails from the moment
// shutdown begins, so load balancers and the aggregator move to another replica before the listener closes.
import { heapStats } from "bun:jsc";
import { Hono } from "hono";
import type { ApiserverMetrics } from "./metrics.ts";

export interface HealthCheck {
  name: string;
  /** Undefined when healthy, else why not. */
  check: () => string | undefined;
}

export interface ObservabilityOptions {
  metrics: ApiserverMetrics;
  /** Refreshes gauges computed at scrape time (inventory freshness). */
  beforeScrape?: () => void;
  live: HealthCheck[];
  ready: HealthCheck[];
  profiling: boolean;
}

function healthResponse(checks: HealthCheck[], url: URL): Response {
  const results = checks.map((c) => ({ name: c.name, problem: c.check() }));
  const failed = results.some((r) => r.problem !== undefined);
  const verbose = url.searchParams.has("verbose") || failed;
  if (!verbose) return new Response("ok", { headers: { "content-type": "text/plain; charset=utf-8" } });
  const lines = results.map((r) => (r.problem === undefined ? `[+]${r.name} ok` : `[-]${r.name} failed: ${r.problem}`));
  lines.push(failed ? `${url.pathname.slice(1)} check failed` : `${url.pathname.slice(1)} check passed`);
  return new Response(`${lines.join("\n")}\n`, { status: failed ? 500 : 200, headers: { "content-type": "text/plain; charset=utf-8" } });
}

export function observabilityRoutes(o: ObservabilityOptions): Hono {
  const app = new Hono();
  app.get("/healthz", (c) => healthResponse(o.live, new URL(c.req.url)));
  app.get("/livez", (c) => healthResponse(o.live, new URL(c.req.url)));
  app.get("/readyz", (c) => healthResponse([...o.live, ...o.ready], new URL(c.req.url)));
  app.get("/metrics", async () => {
    o.beforeScrape?.();
    return new Response(await o.metrics.registry.metrics(), { headers: { "content-type": o.metrics.registry.contentType } });
  });
  if (o.profiling) {
    // Bun has no pprof; these are its equivalents: JavaScriptCore heap statistics and a full heap snapshot.
    app.get("/debug/pprof/", (c) =>
      c.html(
        "<html><body><h1>/debug/pprof/</h1><ul>" +
          '<li><a href="heapstats">heapstats</a>: JavaScriptCore heap statistics (JSON)</li>' +
          '<li><a href="heap">heap</a>: a heap snapshot (JSON, loadable in WebKit/Safari devtools)</li>' +
          "</ul></body></html>",
      ),
    );
    app.get("/debug/pprof/heapstats", (c) => c.json(heapStats()));
    app.get("/debug/pprof/heap", () => Response.json(Bun.generateHeapSnapshot()));
  }
  return app;
}
