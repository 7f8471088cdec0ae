// The proxy's own Prometheus metrics (upstream's proxy has none): requests by status, bytes each way, time to the
// guest's response head, open tunnels, active relays (and the public ones), buffered bytes, refusals by cap, slow
// request bodies, guest framing errors, owner lookups by source. One
// registry per proxy instance, so two proxies in one process (tests) do not collide. The relay and buffer gauges
// are read at scrape time from their counters (limits.ts), so the hot path never touches them.
import { Counter, Gauge, Histogram, Registry } from "../metrics/index.ts";

/** What the gauges read when scraped. */
export interface RelayReadings {
  activeRelays(): number;
  bufferedBytes(): number;
  /** Credential-less relays (public user ports) among activeRelays. */
  activePublicRelays?(): number;
}

export class RelayMetrics {
  readonly registry = new Registry();
  constructor(private readonly readings: RelayReadings = { activeRelays: () => 0, bufferedBytes: () => 0 }) {}
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
  readonly wakeWaitSeconds = new Histogram({
    name: "sandbox_envd_proxy_wake_seconds",
    help: "For requests to a sandbox the fleet view showed asleep (hibernated or archived): from the node dial to its 101, i.e. the wait for the wake.",
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });
  readonly wakes = new Counter({
    name: "sandbox_envd_proxy_wakes_total",
    help: "Requests to a sandbox the fleet view showed asleep, by outcome: ok (relayed once it woke), failed (answered 502: its node could not wake it), timeout (answered 504: not woken within --wake-timeout).",
    labelNames: ["outcome"] as const,
    registers: [this.registry],
  });
  readonly openTunnels = new Gauge({ name: "sandbox_envd_proxy_open_tunnels", help: "Node ports-relay connections currently open.", registers: [this.registry] });
  readonly activeRelays: Gauge = new Gauge({
    name: "sandbox_envd_proxy_active_relays",
    help: "Relays (HTTP requests and WebSockets to guests) holding a slot under --max-relays, from the dial until the tunnel closes.",
    registers: [this.registry],
    collect: (): void => this.activeRelays.set(this.readings.activeRelays()),
  });
  readonly activePublicRelays: Gauge = new Gauge({
    name: "sandbox_envd_proxy_active_public_relays",
    help: "Relays without a credential (public user ports) holding a slot under --max-public-relays; counted in sandbox_envd_proxy_active_relays too.",
    registers: [this.registry],
    collect: (): void => this.activePublicRelays.set(this.readings.activePublicRelays?.() ?? 0),
  });
  readonly bufferedBytes: Gauge = new Gauge({
    name: "sandbox_envd_proxy_buffered_bytes",
    help: "Bytes the proxy holds for slow readers across every relay, counted against --relay-buffer-max.",
    registers: [this.registry],
    collect: (): void => this.bufferedBytes.set(this.readings.bufferedBytes()),
  });
  readonly refused = new Counter({
    name: "sandbox_envd_proxy_refused_total",
    help: "Relays refused by a cap: sandbox, client and namespace (429), global (503); without a credential: public_sandbox and public_client (429), public_global (503).",
    labelNames: ["cap"] as const,
    registers: [this.registry],
  });
  readonly slowBodies = new Counter({
    name: "sandbox_envd_proxy_slow_request_bodies_total",
    help: "Requests answered 408 because their body arrived slower than --request-body-min-rate over a --request-body-rate-window.",
    registers: [this.registry],
  });
  readonly pacedReads = new Counter({
    name: "sandbox_envd_proxy_paced_reads_total",
    help: "Reads of a chunked guest body that overdrew its namespace's decode budget (100,000 chunks/s), after which the stream paused at the guest until the budget refilled.",
    registers: [this.registry],
  });
  readonly upstreamErrors = new Counter({
    name: "sandbox_envd_proxy_upstream_errors_total",
    help: "Relays that failed toward the node or guest (answered 502), by reason: unavailable, refused, paused, unreachable, wake, guest.",
    labelNames: ["reason"] as const,
    registers: [this.registry],
  });
  readonly framingErrors = new Counter({
    name: "sandbox_envd_proxy_guest_framing_errors_total",
    help: "Guest replies that broke HTTP/1.1 framing, by phase: head (answered 502), body (the client's download failed).",
    labelNames: ["phase"] as const,
    registers: [this.registry],
  });
  readonly lookups = new Counter({
    name: "sandbox_envd_proxy_owner_lookups_total",
    help: "Owner resolutions by outcome: cache, inventory, probe, bad_token, unavailable.",
    labelNames: ["result"] as const,
    registers: [this.registry],
  });
}
