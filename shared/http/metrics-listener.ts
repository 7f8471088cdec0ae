// A listener that serves only Prometheus metrics (`GET /metrics`), kept apart from a public listener so that what
// a binary counts (fleet-wide request and lookup figures) is not open to whoever reaches the public port (spec
// README, decisions for wave 3; issue 17 case 10). Plain HTTP: it is meant for a pod port that only the scraper
// reaches; every other path is a 404 envelope.
import { splitHostPort } from "../config/index.ts";
import type { Logger } from "../log/index.ts";
import type { Registry } from "../metrics/index.ts";
import { codeMessageEnvelope, guardRequests, uncaughtErrorHandler } from "./entry.ts";

export interface MetricsListen {
  /** `host:port` or `:port`. */
  address: string;
  /** Served together, in this order (a binary may hold several registries: the relay's, its own). */
  registries: readonly Registry[];
  log: Logger;
}

export function serveMetrics(l: MetricsListen): ReturnType<typeof Bun.serve> {
  const { host, port } = splitHostPort(l.address);
  const contentType = l.registries[0]?.contentType ?? "text/plain; version=0.0.4; charset=utf-8";
  const answer = async (req: Request): Promise<Response> => {
    const path = new URL(req.url).pathname;
    if (path !== "/metrics") return codeMessageEnvelope(404, "not found: this listener serves only /metrics");
    if (req.method !== "GET" && req.method !== "HEAD") return codeMessageEnvelope(405, `${req.method} is not allowed on /metrics`);
    const texts = await Promise.all(l.registries.map((r) => r.metrics()));
    return new Response(texts.filter((t) => t !== "").join("\n"), { headers: { "content-type": contentType } });
  };
  return Bun.serve({
    hostname: host === "" ? "0.0.0.0" : host,
    port: Number(port),
    development: false,
    error: uncaughtErrorHandler(l.log, codeMessageEnvelope),
    fetch: guardRequests(codeMessageEnvelope, answer),
  });
}
