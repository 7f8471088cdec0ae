// A standalone envd proxy (the chart's sandbox-envd-proxy, in-process) on a loopback port over a test's own view of
// a fleet: the e2b tests reach sandboxes through a proxy that sees the fleet differently from the e2b surface beside
// it (its view lists nothing yet, so every lookup is a live probe; or its entries lack a stamp the surface saw).
import type { FleetNode } from "#shared/fleet/index.ts";
import { createLogger } from "#shared/log/index.ts";
import { EnvdRelay, serveRelay } from "#shared/relay/index.ts";

export interface StandaloneProxyOptions {
  domain: string;
  envdSecret: string;
  rootToken: string;
  /** The nodes the proxy's fleet lists, read on every lookup (so it follows the fleet it is derived from). */
  nodes: () => readonly FleetNode[];
}

export interface StandaloneProxy {
  server: ReturnType<typeof Bun.serve>;
  url: string;
  port: number;
}

/** Serves the proxy on 127.0.0.1:<free port>, every namespace, HTTP/1 to the guests; stop it with `server.stop(true)`. */
export function standaloneProxy(o: StandaloneProxyOptions): StandaloneProxy {
  const fleet = { nodes: o.nodes, ready: () => Promise.resolve(), stop: () => Promise.resolve() };
  const log = createLogger({ level: "error", name: "proxy" });
  const relay = new EnvdRelay({ domain: o.domain, fleet, envdSecret: o.envdSecret, rootToken: o.rootToken, namespace: "", guestHttp2: false, log });
  const server = serveRelay(relay, { address: "127.0.0.1:0", log });
  const port = server.port;
  if (port === undefined) throw new Error("standalone envd proxy: the listener reports no port");
  return { server, url: `http://127.0.0.1:${port}`, port };
}

/** The same nodes with no entries: a proxy over this view finds every sandbox by a live probe of the nodes. */
export function unlisted(nodes: readonly FleetNode[]): FleetNode[] {
  return nodes.map((n) => ({ ...n, entries: [] }));
}
