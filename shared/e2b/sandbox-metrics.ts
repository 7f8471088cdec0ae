// Sandbox metrics (docs/e2b.md "Metrics"): one envd `/metrics` reading of a running sandbox through the node's
// passive relay (root token: never wakes it, never counts as activity); a paused sandbox answers [] and stays paused.
import type { Clock } from "../clock/index.ts";
import { FANOUT_CONCURRENCY, mapLimit } from "../fleet/index.ts";
import { METRICS_MAX_BYTES, METRICS_TIMEOUT_MS, envdCall } from "./envd.ts";
import { E2bError, badRequest } from "./errors.ts";
import { claimedAtOf, type LiveLookup } from "./lookup.ts";
import { isPaused, wireTime } from "./render.ts";
import { EnvdMetrics, type SandboxMetric } from "./schemas.ts";
import type { E2bSettings } from "./settings.ts";
import type { TokenForms } from "./token-forms.ts";

/** At most this many ids in one `GET /sandboxes/metrics`. */
const MANY_MAX = 100;

export interface MetricsDeps {
  settings: Pick<E2bSettings, "rootToken">;
  lookup: Pick<LiveLookup, "read">;
  tokenForms: Pick<TokenForms, "accessTokenFor">;
  clock: Clock;
}

export class SandboxMetrics {
  constructor(private readonly d: MetricsDeps) {}

  /** One metric of a running sandbox through the passive relay; [] when paused (never woken). */
  async metrics(ns: string, id: string): Promise<SandboxMetric[]> {
    const fixed = "failed to read sandbox metrics";
    const { loc, row } = await this.d.lookup.read(ns, id, fixed);
    if (isPaused(row)) return [];
    if (!row.token) throw new E2bError(500, fixed);
    let reply;
    try {
      const token = await this.d.tokenForms.accessTokenFor(loc.address, loc.claimId, row.token, claimedAtOf(row));
      reply = await envdCall(
        { address: loc.address, claimId: loc.claimId, rootToken: this.d.settings.rootToken },
        { method: "GET", path: "/metrics", headers: { "x-access-token": token }, timeoutMs: METRICS_TIMEOUT_MS, maxBytes: METRICS_MAX_BYTES },
      );
    } catch (err) {
      // Paused between the read and the relay: the node refuses the passive relay with 409.
      if ((err as { status?: number }).status === 409) return [];
      throw new E2bError(500, fixed);
    }
    if (reply.status !== 200) throw new E2bError(500, fixed);
    let parsed;
    try {
      parsed = EnvdMetrics.parse(JSON.parse(reply.body.toString("utf8")));
    } catch {
      throw new E2bError(500, fixed);
    }
    const tsMs = parsed.ts ? parsed.ts * 1000 : this.d.clock.now();
    return [
      {
        timestamp: wireTime(tsMs),
        timestampUnix: Math.floor(tsMs / 1000),
        cpuCount: Math.round(parsed.cpu_count ?? 0),
        cpuUsedPct: parsed.cpu_used_pct ?? 0,
        memUsed: Math.round(parsed.mem_used ?? 0),
        memTotal: Math.round(parsed.mem_total ?? 0),
        memCache: Math.round(parsed.mem_cache ?? 0),
        diskUsed: Math.round(parsed.disk_used ?? 0),
        diskTotal: Math.round(parsed.disk_total ?? 0),
      },
    ];
  }

  /** `GET /sandboxes/metrics?sandbox_ids=a,b`: the latest metric of each visible, running one (others left out). */
  async metricsMany(ns: string, idsText: string | undefined): Promise<Record<string, SandboxMetric>> {
    const ids = (idsText ?? "").split(",").map((s) => s.trim());
    if (ids.length === 0 || ids.some((s) => s === "")) throw badRequest(`sandbox_ids: give 1 to ${MANY_MAX} comma-separated, non-empty ids`);
    if (ids.length > MANY_MAX) throw badRequest(`sandbox_ids: at most ${MANY_MAX} ids`);
    if (new Set(ids).size !== ids.length) throw badRequest("sandbox_ids: an id is repeated");
    const out: Record<string, SandboxMetric> = {};
    const results = await mapLimit(ids, FANOUT_CONCURRENCY, (id) => this.metrics(ns, id));
    ids.forEach((id, i) => {
      const r = results[i];
      if (Array.isArray(r) && r[0]) out[id] = r[0];
    });
    return out;
  }
}
