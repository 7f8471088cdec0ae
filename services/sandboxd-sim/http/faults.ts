// sandboxd-sim — development substrate standing in for sandboxd (which needs KVM). Not product code.
//
// Fault injection, applied by the socket layer before (and, for reset-after, after) a route's handler:
//   latency(route, ms | () => ms)   a slow node (real wall time: it is meant to trip client timeouts)
//   hang(route, count?, when?)      accept the request, never answer (until the client gives up or the sim stops);
//                                   "after" commits first (the claim exists) — a reply that never comes
//   fail(route, status, body?, n?, pathIncludes?)  answer the next n requests (default 1) without touching state;
//                                   with pathIncludes, only requests whose path contains it (one sandbox's id)
//   reset(route, "before"|"after")  drop the connection before handling, or after committing — the ambiguous
//                                   "claim delivered, reply lost"
//   listFails(mode)                 GET /v1/sandboxes only: "500" | "hang" | "truncated" | "oversize" | false
// A route is a name from routes/table.ts, or "*" for every route.
import type { RouteName } from "../routes/index.ts";

export type FaultRoute = RouteName | "*";
export type ListFailMode = "500" | "hang" | "truncated" | "oversize" | false;
export type Latency = number | (() => number);

export type FaultAction =
  | { kind: "fail"; status: number; body?: unknown }
  | { kind: "reset"; when: "before" | "after" }
  | { kind: "hang"; when?: "before" | "after" };

interface Queued {
  route: FaultRoute;
  action: FaultAction;
  remaining: number;
  /** Only requests whose path contains this (e.g. one sandbox id). */
  pathIncludes?: string;
}

export class Faults {
  private readonly latencies = new Map<FaultRoute, Latency>();
  private queue: Queued[] = [];
  listMode: ListFailMode = false;

  latency(route: FaultRoute, ms: Latency | null): void {
    if (ms === null || ms === 0) this.latencies.delete(route);
    else this.latencies.set(route, ms);
  }
  latencyFor(route: RouteName): number {
    const l = this.latencies.get(route) ?? this.latencies.get("*");
    if (l === undefined) return 0;
    return Math.max(0, typeof l === "function" ? l() : l);
  }

  /** count: how many requests the fault applies to (Infinity = until cleared). */
  push(route: FaultRoute, action: FaultAction, count = 1, pathIncludes?: string): void {
    this.queue.push({ route, action, remaining: count, ...(pathIncludes ? { pathIncludes } : {}) });
  }

  /** The next queued action for this route, consuming one use of it. */
  take(route: RouteName, path = ""): FaultAction | undefined {
    const q = this.queue.find(
      (x) => x.remaining > 0 && (x.route === route || x.route === "*") && (x.pathIncludes === undefined || path.includes(x.pathIncludes)),
    );
    if (!q) return undefined;
    q.remaining--;
    this.queue = this.queue.filter((x) => x.remaining > 0);
    return q.action;
  }

  clear(): void {
    this.latencies.clear();
    this.queue = [];
    this.listMode = false;
  }
}
