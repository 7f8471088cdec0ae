// A listener that serves only Prometheus metrics (`GET /metrics`), kept apart from a public listener so that what
// a binary counts (fleet-wide request and lookup figures) is not open to whoever reaches the public port (spec
// README, decisions for wave 3; issue 17 case 10). Plain HTTP: it is meant for a pod port that only the scraper
// reaches; every other path is a 404 envelope.
import { StartupError, splitHostPort } from "../config/index.ts";
import type { Shutdown } from "../lifecycle/index.ts";
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

/**
 * A binary's `--metrics-bind-address` listener at startup: none when the flag is empty; a listen failure undoes what
 * the binary already started (`undo`) and is a StartupError naming the flag; registered with the shutdown sequence.
 */
export async function startMetricsListener(
  o: Omit<MetricsListen, "address"> & { address: string | undefined; shutdown?: Shutdown; undo: () => Promise<void> },
): Promise<ReturnType<typeof Bun.serve> | undefined> {
  if (o.address === undefined) return undefined;
  let server: ReturnType<typeof Bun.serve>;
  try {
    server = serveMetrics({ address: o.address, registries: o.registries, log: o.log });
  } catch (err) {
    await o.undo();
    throw new StartupError(`cannot listen on --metrics-bind-address ${o.address}: ${(err as Error).message}`, { flag: "--metrics-bind-address" }, err);
  }
  o.shutdown?.addListener("metrics", () => server.stop(true));
  o.log.info({ address: o.address, port: server.port }, "metrics listening");
  return server;
}
