// The process's Prometheus registry (docs/serving.md "Observability"): request counts and latencies by verb and
// code under kube-apiserver's names, inventory freshness, claims, warm-pool driver actions, and process metrics.
// One registry per server instance (tests run several in one process).
import collectDefaultMetrics from "prom-client/lib/defaultMetrics.js";
import { Counter, Gauge, Histogram, Registry } from "#shared/metrics/index.ts";

export class ApiserverMetrics {
  readonly registry = new Registry();
  readonly requests = new Counter({
    name: "apiserver_request_total",
    help: "Counter of apiserver requests broken out for each verb, group, version, resource, subresource, scope and HTTP response code.",
    labelNames: ["verb", "group", "version", "resource", "subresource", "scope", "code"] as const,
    registers: [this.registry],
  });
  readonly latency = new Histogram({
    name: "apiserver_request_duration_seconds",
    help: "Response latency distribution in seconds for each verb, group, version, resource, subresource and scope (watches: time to the response headers).",
    labelNames: ["verb", "group", "version", "resource", "subresource", "scope"] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    registers: [this.registry],
  });
  readonly inventoryNodes = new Gauge({
    name: "sandbox_inventory_nodes",
    help: "Nodes in this process's inventory view by freshness (--inventory-stale-after).",
    labelNames: ["state"] as const,
    registers: [this.registry],
  });
  readonly inventoryNewestAge = new Gauge({
    name: "sandbox_inventory_newest_publish_age_seconds",
    help: "Seconds since the newest NodeInventory publishedAt this process has seen (grows during a control-plane write outage).",
    registers: [this.registry],
  });
  readonly claims = new Counter({
    name: "sandbox_claims_total",
    help: "Claims attempted on a node, by surface and outcome.",
    labelNames: ["surface", "outcome"] as const,
    registers: [this.registry],
  });
  readonly driverActions = new Counter({
    name: "sandbox_warmpool_driver_actions_total",
    help: "Warm-pool driver actions: pool-set PUTs per node and status writes, by outcome.",
    labelNames: ["action", "outcome"] as const,
    registers: [this.registry],
  });
  readonly desiredReplicas = new Gauge({
    name: "sandbox_warmpool_desired_replicas",
    help: "The replicas the driver spreads for a SandboxWarmPool: spec.replicas, or the autoscaler's target when the pool autoscales (set by the driver leader).",
    labelNames: ["namespace", "pool"] as const,
    registers: [this.registry],
  });
  readonly readyReplicas = new Gauge({
    name: "sandbox_warmpool_ready_replicas",
    help: "What the driver wrote to SandboxWarmPool status.readyReplicas.",
    labelNames: ["namespace", "pool"] as const,
    registers: [this.registry],
  });
  readonly driverLeader = new Gauge({
    name: "sandbox_warmpool_driver_leader",
    help: "1 while this replica holds the cocoon-warmpool-driver Lease.",
    registers: [this.registry],
  });

  // Autoscaling (docs/warmpool.md "Autoscaling"): the decision and what it was computed from, per pool.
  readonly autoscaleTarget = new Gauge({
    name: "sandbox_warmpool_autoscale_target",
    help: "Warm VMs the autoscaler wants for an autoscaled SandboxWarmPool (after bounds and scale-down stabilization).",
    labelNames: ["namespace", "pool"] as const,
    registers: [this.registry],
  });
  readonly claimRate = new Gauge({
    name: "sandbox_warmpool_claims_per_second",
    help: "Measured claim rate of an autoscaled pool's key (inventory-observed and own claims).",
    labelNames: ["namespace", "pool"] as const,
    registers: [this.registry],
  });
  readonly refillSeconds = new Gauge({
    name: "sandbox_warmpool_refill_seconds",
    help: "Refill time used for an autoscaled pool: the refill time most of the last 32 measured samples contain (shared/fleet/demand.ts), or the default before the first.",
    labelNames: ["namespace", "pool"] as const,
    registers: [this.registry],
  });
  readonly hiddenSandboxes = new Gauge({
    name: "sandbox_inventory_stale_hidden_sandboxes",
    help: "Sandboxes listed by stale NodeInventories, hidden from every read until their node publishes again.",
    registers: [this.registry],
  });
  readonly publishLag = new Histogram({
    name: "sandbox_inventory_publish_lag_seconds",
    help: "Seconds between a NodeInventory's publishedAt and this process seeing it, per node.",
    labelNames: ["node"] as const,
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
    registers: [this.registry],
  });

  // The canary (docs/operations.md "Canary"): claim → envd /init → one command → release, per node and pool key.
  readonly canaryRuns = new Counter({
    name: "sandbox_canary_runs_total",
    help: "Canary probes by node, pool key and outcome (ok, claim_failed, init_failed, command_failed, release_failed).",
    labelNames: ["node", "template", "net", "size", "outcome"] as const,
    registers: [this.registry],
  });
  readonly canaryTimeToFirstCommand = new Histogram({
    name: "sandbox_canary_time_to_first_command_seconds",
    help: "Seconds from a canary's claim to the end of its first command (successful probes).",
    labelNames: ["node", "template", "net", "size"] as const,
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  });

  constructor() {
    collectDefaultMetrics({ register: this.registry });
  }
}
