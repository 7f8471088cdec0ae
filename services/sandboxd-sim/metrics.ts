// sandboxd-sim — development substrate standing in for sandboxd (which needs KVM). Not product code.
//
// GET /metrics: Prometheus text, every name `sandboxd_`-prefixed, gauges from live state, counters from the node.
import type { SimNode } from "./node.ts";

const esc = (v: string) => v.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");

export function metricsText(node: SimNode): string {
  const lines: string[] = [];
  const gauge = (name: string, value: number, labels = "") => lines.push(`sandboxd_${name}${labels} ${value}`);
  lines.push("# TYPE sandboxd_claimed gauge");
  gauge("claimed", node.table.size);
  gauge("hibernated", node.table.count((c) => c.state === "hibernated"));
  gauge("archived", node.table.count((c) => c.state === "archived"));
  gauge("failed", node.table.count((c) => c.state === "failed"));
  gauge("draining", node.draining ? 1 : 0);
  // One series per configured tenant, zero included (a removed tenant's claims run on but are not reported).
  for (const t of node.tokens.tenants.keys()) gauge("tenant_claims", node.table.count((c) => c.tenant === t), `{tenant="${esc(t)}"}`);
  // On a mesh: whether this node's config digest differs from its peers'. Simulated nodes share one config.
  if (node.peerAddrs.length > 0) gauge("config_digest_mismatch", 0);
  for (const p of node.pools.status()) {
    const l = `{template="${esc(p.key.template)}",net="${p.key.net}",size="${p.key.size}"}`;
    gauge("pool_warm", p.warm, l);
    gauge("pool_target", p.target, l);
  }
  const counters = [
    "claim_seconds_total", "wake_seconds_total", "wakes_total", "hibernates_total", "forks_total", "checkpoints_total",
    "promotes_total", "releases_total", "reaps_total", "archives_total", "unarchives_total", "archive_deletes_total",
  ];
  for (const tier of ["warm", "clone", "cold"]) {
    lines.push(`sandboxd_claims_total{tier="${tier}"} ${node.counters.get(`claims_total{tier="${tier}"}`) ?? 0}`);
  }
  for (const name of counters) lines.push(`sandboxd_${name} ${node.counters.get(name) ?? 0}`);
  return lines.join("\n") + "\n";
}
