// The proxy's own Prometheus metrics (upstream's proxy has none): requests by status, bytes each way, time to the
// guest's response head, open tunnels, owner lookups by source. One registry per proxy instance, so two proxies
// in one process (tests) do not collide.
import { Counter, Gauge, Histogram, Registry } from "../metrics/index.ts";

export class RelayMetrics {
  readonly registry = new Registry();
  readonly requests = new Counter({ name: "sandbox_envd_proxy_requests_total", help: "Requests answered, by HTTP status.", labelNames: ["code"] as const, registers: [this.registry] });
  readonly bytes = new Counter({
    name: "sandbox_envd_proxy_bytes_total",
    help: "Body bytes relayed: in = client to guest, out = guest to client.",
    labelNames: ["direction"] as const,
    registers: [this.registry],
  });
  readonly upstreamSeconds = new Histogram({
    name: "sandbox_envd_proxy_upstream_seconds",
    help: "From the start of the node dial to the guest's response head.",
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });
  readonly openTunnels = new Gauge({ name: "sandbox_envd_proxy_open_tunnels", help: "Node ports-relay connections currently open.", registers: [this.registry] });
  readonly upstreamErrors = new Counter({
    name: "sandbox_envd_proxy_upstream_errors_total",
    help: "Relays that failed toward the node or guest (answered 502), by reason: unavailable, refused, paused, unreachable, guest.",
    labelNames: ["reason"] as const,
    registers: [this.registry],
  });
  readonly lookups = new Counter({
    name: "sandbox_envd_proxy_owner_lookups_total",
    help: "Owner resolutions by outcome: cache, inventory, probe, bad_token, unavailable.",
    labelNames: ["result"] as const,
    registers: [this.registry],
  });
}
