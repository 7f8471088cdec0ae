// The node daemon's own Prometheus metrics, served at `/metrics` on the kubelet API port (issue 13 item 1; the
// upstream Go daemon has none). One registry per daemon, so two daemons in one process (tests) do not collide.
// What an operator reads here: claims and releases by outcome with their latency, the claims-table write latency,
// the pod queues' depth and wait, sandboxd failures by route, the apiserver requests by verb and code with their
// latency, and a Pod's whole way from informer to Running status (docs/performance.md has the hops).
//
// The instrumented seams are adapters around what the provider and the kube client already consume, so no module
// of the claim path knows metrics exist: the sandboxd slices (types.ts), the claims file, the kube transport.
import type { Histogram } from "prom-client";
import { Counter, Gauge, Histogram as Hist, Registry } from "#shared/metrics/index.ts";
import { type ClaimsFile, bodyBytes } from "./claims/index.ts";
import type { SandboxClaimer, SandboxLister, SandboxReader, SandboxReleaser } from "./provider/index.ts";
import type { Transport } from "#shared/kube/index.ts";
import type { InventorySizes } from "./inventory/index.ts";

const FAST = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 90];

export class VkSandboxMetrics {
  readonly registry = new Registry();
  readonly claims = new Counter({
    name: "vk_sandbox_claims_total",
    help: "POST /v1/claim calls by outcome: ok, capacity (429, an empty 200 or a redirect), lost (reply lost; reconciled by the stamp), error.",
    labelNames: ["outcome"] as const,
    registers: [this.registry],
  });
  readonly claimSeconds = new Hist({
    name: "vk_sandbox_claim_seconds",
    help: "Latency of POST /v1/claim by outcome.",
    labelNames: ["outcome"] as const,
    buckets: FAST,
    registers: [this.registry],
  });
  readonly releases = new Counter({
    name: "vk_sandbox_releases_total",
    help: "Release calls by outcome: released, already_gone (404), error.",
    labelNames: ["outcome"] as const,
    registers: [this.registry],
  });
  readonly releaseSeconds = new Hist({
    name: "vk_sandbox_release_seconds",
    help: "Latency of POST /v1/sandboxes/{id}/release by outcome.",
    labelNames: ["outcome"] as const,
    buckets: FAST,
    registers: [this.registry],
  });
  readonly stateWriteSeconds = new Hist({
    name: "vk_sandbox_state_write_seconds",
    help: "Durable claims-table writes (tmp, fsync, rename, directory fsync) by outcome: ok, error.",
    labelNames: ["outcome"] as const,
    buckets: FAST,
    registers: [this.registry],
  });
  readonly stateWriteBytes = new Counter({ name: "vk_sandbox_state_write_bytes_total", help: "Bytes written to the claims table.", registers: [this.registry] });
  readonly sandboxdErrors = new Counter({
    name: "vk_sandbox_sandboxd_errors_total",
    help: "Failed sandboxd calls by route (claim, release, list, get, info).",
    labelNames: ["route"] as const,
    registers: [this.registry],
  });
  /** The queues the depth gauge reads when scraped (set by wire once the controller exists). */
  private queues: Array<{ name: string; length: number }> = [];
  readonly queueDepth = new Gauge({
    name: "vk_sandbox_queue_depth",
    help: "Keys queued or running in each pod queue (sync, delete, status).",
    labelNames: ["queue"] as const,
    registers: [this.registry],
    collect: () => {
      for (const q of this.queues) this.queueDepth.set({ queue: q.name }, q.length);
    },
  });
  readonly queueWaitSeconds = new Hist({
    name: "vk_sandbox_queue_wait_seconds",
    help: "Time from a key's due moment to its handler starting, by queue: the waiting that is ours.",
    labelNames: ["queue"] as const,
    buckets: FAST,
    registers: [this.registry],
  });
  readonly apiRequestSeconds = new Hist({
    name: "vk_sandbox_apiserver_request_seconds",
    help: "Latency of requests to the kube-apiserver, to the response headers, by verb (watches not included). The status PUT is verb update.",
    labelNames: ["verb"] as const,
    buckets: FAST,
    registers: [this.registry],
  });
  readonly podRunningSeconds = new Hist({
    name: "vk_sandbox_pod_running_seconds",
    help: "From a Pod's first sight in the informer to its first Running status write landing: the sync queue, the claim, the claims-table write, the status queue and the PUT.",
    buckets: FAST,
    registers: [this.registry],
  });
  readonly apiRequests = new Counter({
    name: "vk_sandbox_apiserver_requests_total",
    help: "Requests to the kube-apiserver by verb (get, list, watch, create, update, patch, delete) and HTTP code (0 = no answer).",
    labelNames: ["verb", "code"] as const,
    registers: [this.registry],
  });

  /** The exposition text and its content type. */
  async exposition(): Promise<{ body: string; contentType: string }> {
    return { body: await this.registry.metrics(), contentType: this.registry.contentType };
  }

  /** The queue depth gauge reads these queues when scraped, not on every change. */
  watchQueues(queues: Array<{ name: string; length: number }>): void {
    this.queues = queues;
  }

  /** The sandboxd slices the provider consumes, counted and timed. */
  sandboxd<T extends SandboxClaimer & SandboxReleaser & SandboxLister & SandboxReader>(inner: T): SandboxClaimer & SandboxReleaser & SandboxLister & SandboxReader {
    return {
      claim: async (req, opts) => {
        const end = this.claimSeconds.startTimer();
        try {
          const reply = await inner.claim(req, opts);
          this.observe(this.claims, end, "ok");
          return reply;
        } catch (e) {
          const code = (e as { code?: string }).code;
          const outcome = code === "capacity" || code === "redirect" ? "capacity" : code === "ambiguous_claim" ? "lost" : "error";
          this.observe(this.claims, end, outcome);
          if (outcome !== "capacity") this.sandboxdErrors.inc({ route: "claim" });
          throw e;
        }
      },
      release: async (id, opts) => {
        const end = this.releaseSeconds.startTimer();
        try {
          const r = await inner.release(id, opts);
          this.observe(this.releases, end, r === "released" ? "released" : "already_gone");
          return r;
        } catch (e) {
          // A 404 surfaces as a typed error from some callers' clients; the provider reads it as already gone.
          const notFound = (e as { code?: string }).code === "not_found";
          this.observe(this.releases, end, notFound ? "already_gone" : "error");
          if (!notFound) this.sandboxdErrors.inc({ route: "release" });
          throw e;
        }
      },
      list: () => this.counted("list", () => inner.list()),
      get: (id) => this.counted("get", () => inner.get(id)),
      info: () => this.counted("info", () => inner.info()),
    };
  }

  /** The claims file with every write timed (the group commit calls write once per batch). */
  claimsFile(file: ClaimsFile): ClaimsFile {
    const write = file.write.bind(file);
    file.write = async (text: Parameters<ClaimsFile["write"]>[0]) => {
      const end = this.stateWriteSeconds.startTimer();
      try {
        await write(text);
        end({ outcome: "ok" });
        this.stateWriteBytes.inc(bodyBytes(text));
      } catch (e) {
        end({ outcome: "error" });
        throw e;
      }
    };
    return file;
  }

  readonly inventoryBytes = new Gauge({
    name: "vk_sandbox_inventory_bytes",
    help:
      "Size of this node's published inventory at the last publish: object=largest (the one etcd's 1.5 MiB limit applies to; " +
      "the node warns past --inventory-warn-bytes) and object=total (root and every shard: what each reader holds).",
    labelNames: ["object"] as const,
    registers: [this.registry],
  });
  readonly inventoryRows = new Gauge({ name: "vk_sandbox_inventory_rows", help: "Rows (sandboxes) in the last published inventory.", registers: [this.registry] });
  readonly inventoryShards = new Gauge({
    name: "vk_sandbox_inventory_shards",
    help: "NodeInventoryShard objects of the last publish (0 in the single form).",
    registers: [this.registry],
  });
  readonly inventoryAppliedBytes = new Counter({
    name: "vk_sandbox_inventory_applied_bytes_total",
    help: "Bytes of inventory applies sent to the apiserver (the root every publish, a shard only when its rows changed).",
    registers: [this.registry],
  });

  /** Called by the inventory publisher after each successful publish. */
  observeInventory(s: InventorySizes): void {
    this.inventoryBytes.set({ object: "largest" }, s.largestObjectBytes);
    this.inventoryBytes.set({ object: "total" }, s.totalBytes);
    this.inventoryRows.set(s.rows);
    this.inventoryShards.set(s.shards);
    this.inventoryAppliedBytes.inc(s.appliedBytes);
  }

  /** The kube transport, counting each request by verb and the code it got. */
  kubeTransport(inner: Transport): Transport {
    return async (url, init) => {
      const verb = verbOf(init.method, url);
      const end = verb === "watch" ? undefined : this.apiRequestSeconds.startTimer({ verb });
      try {
        const res = await inner(url, init);
        end?.();
        this.apiRequests.inc({ verb, code: String(res.status) });
        return res;
      } catch (e) {
        end?.();
        this.apiRequests.inc({ verb, code: "0" });
        throw e;
      }
    };
  }

  private observe(counter: Counter<"outcome">, end: ReturnType<Histogram<"outcome">["startTimer"]>, outcome: string): void {
    counter.inc({ outcome });
    end({ outcome });
  }

  private async counted<T>(route: string, call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (e) {
      this.sandboxdErrors.inc({ route });
      throw e;
    }
  }
}

/** The Kubernetes verb of a request: GET splits into get, list and watch by path shape and query. */
export function verbOf(method: string, url: string): string {
  const m = method.toUpperCase();
  if (m === "POST") return "create";
  if (m === "PUT") return "update";
  if (m === "PATCH") return "patch";
  if (m === "DELETE") return "delete";
  if (m !== "GET") return m.toLowerCase();
  const u = new URL(url);
  if (u.searchParams.get("watch") === "1" || u.searchParams.get("watch") === "true") return "watch";
  // After /api/v1 or /apis/<group>/<version>, and after namespaces/<ns>, one segment names a collection (list);
  // more name an object or its subresource (get). /api/v1/namespaces/<ns> itself is a get of the Namespace.
  const parts = u.pathname.split("/").filter(Boolean);
  let rest = parts[0] === "api" ? parts.slice(2) : parts.slice(3);
  if (rest[0] === "namespaces" && rest.length >= 3) rest = rest.slice(2);
  const collection = rest.length === 1;
  return collection ? "list" : "get";
}
