// startApiserver: steps 4–11 of the startup order (docs/architecture.md "Startup"), each failure naming what failed:
//   4 kube client → 5 NodeInventory cache synced (≤ 2 min) → 6 sandboxd token → 7 store → 8 warm-pool driver →
//   9 e2b surface → 10 serving cert + delegated auth config → 11 serve.
// Shutdown: readiness fails and open watches end first, then the listener closes, then the loops stop.
import { readFile } from "node:fs/promises";
import { hostname } from "node:os";
import type { Logger } from "pino";
import { type Clock, realClock } from "#shared/clock/index.ts";
import { type Env, StartupError } from "#shared/config/index.ts";
import { loadE2bSurface } from "#shared/e2b/index.ts";
import { InventoryFleet, hiddenByStale } from "#shared/fleet/index.ts";
import { EventRecorder, KubeClient, isNotFound, kubeEventSink } from "#shared/kube/index.ts";
import { KubeConfigError, loadKubeConnection } from "#shared/kube/index.ts";
import type { Shutdown } from "#shared/lifecycle/index.ts";
import { buildInfo } from "#shared/version.ts";
import { ApiError, MAX_REQUEST_BODY_BYTES, apiRoutes, statusResponse } from "./api/index.ts";
import { createApp } from "./app.ts";
import { EventGate, NamespaceAwareSink, sandboxEventsCounter, startSandboxEvents } from "./events/index.ts";
import { type ApiserverConfig, inertFlagWarnings } from "./flags.ts";
import { NodeClients, PodGuard, kubePodGuardBackend, kubeSubresourceReview } from "./sandboxes/index.ts";
import { SandboxChanges, SandboxReader } from "./sandboxes/index.ts";
import { loadAuthSources, needsLookup, watchAuthSources } from "./serving/index.ts";
import { Authenticator } from "./serving/index.ts";
import { Authorizer } from "./serving/index.ts";
import { servingCertificate } from "./serving/index.ts";
import { ClientCertVerifier, parseCertBundle } from "./serving/index.ts";
import { ApiserverMetrics } from "./serving/index.ts";
import { observabilityRoutes } from "./serving/index.ts";
import { startSecureServer } from "./serving/index.ts";
import { Canary } from "./canary/index.ts";
import { type AutoscaleParams, startWarmPoolDriver, type WarmPoolDriverHandle } from "./warmpool/index.ts";

export interface StartOptions {
  config: ApiserverConfig;
  log: Logger;
  env: Env;
  shutdown: Shutdown;
  clock?: Clock;
  /**
   * How long step 5 waits for the NodeInventory cache before failing with the CRD hint; default 2 min
   * (docs/architecture.md "Startup"). Not a flag: the seed's flag table is the binary's whole --help, so only a
   * programmatic caller (a test expecting the failure) shortens it.
   */
  inventorySyncTimeoutMs?: number;
  /** Autoscaler constants (docs/warmpool.md "Autoscaling"); not flags, for the same reason. Benches shorten the window. */
  autoscale?: AutoscaleParams;
}

export interface RunningApiserver {
  port: number;
  fleet: InventoryFleet;
  metrics: ApiserverMetrics;
  driver?: WarmPoolDriverHandle;
  e2bPort?: number;
}

async function kubeClientFrom(env: Env, what: string, log: Logger, kubeconfig?: string): Promise<KubeClient> {
  try {
    const conn = await loadKubeConnection(kubeconfig ? { KUBECONFIG: kubeconfig } : env);
    return new KubeClient(conn, { userAgent: `sandbox-apiserver/${buildInfo.version}`, log: log.child({ component: "kube", client: what }) });
  } catch (e) {
    if (e instanceof KubeConfigError) throw new StartupError(`load kube config${kubeconfig ? ` (${what} ${kubeconfig})` : ""}: ${e.message}`, {});
    throw e;
  }
}

export async function readSandboxdToken(config: Pick<ApiserverConfig, "sandboxdToken" | "sandboxdTokenFile">): Promise<string> {
  if (!config.sandboxdTokenFile) return config.sandboxdToken;
  try {
    return (await readFile(config.sandboxdTokenFile, "utf8")).trim();
  } catch (e) {
    throw new StartupError(`sandboxd: read token file "${config.sandboxdTokenFile}": ${(e as Error).message}`, { flag: "--sandboxd-token-file" });
  }
}

export async function startApiserver(o: StartOptions): Promise<RunningApiserver> {
  const { config, log, env, shutdown } = o;
  const clock = o.clock ?? realClock;
  const metrics = new ApiserverMetrics();
  for (const { flag, message } of inertFlagWarnings(config)) log.warn({ flag }, message);

  // 4. Kube client: service account in a cluster, KUBECONFIG outside.
  const kube = await kubeClientFrom(env, "main", log);

  // 5. NodeInventory cache.
  const fleet = new InventoryFleet({
    client: kube,
    staleAfterMs: config.inventoryStaleAfter,
    trustedNetworks: config.inventoryTrustedNetworks,
    clock,
    log: log.child({ component: "inventory" }),
    ...(o.inventorySyncTimeoutMs !== undefined ? { syncTimeoutMs: o.inventorySyncTimeoutMs } : {}),
  });
  shutdown.addCloser("inventory", () => fleet.stop());
  try {
    await fleet.ready();
  } catch (e) {
    throw new StartupError((e as Error).message, { resource: "nodeinventories.sandbox.cocoonstack.io" });
  }

  // Demand per pool key, measured by the inventory source on every replica (the autoscaler and the capacity answer
  // read it), and the inventory's publish lag per node (docs/warmpool.md "Autoscaling").
  const demand = fleet.demand;
  const lagSeen = new Map<string, number>();
  const observeFleet = () => {
    const now = clock.now();
    for (const r of fleet.all()) {
      if (r.publishedAt === undefined || lagSeen.get(r.name) === r.publishedAt) continue;
      lagSeen.set(r.name, r.publishedAt);
      metrics.publishLag.observe({ node: r.name }, Math.max(0, (now - r.publishedAt) / 1000));
    }
    // A set, not a scan of every record per name: this runs on every inventory event, N times a publish wave.
    if (lagSeen.size > fleet.all().length) {
      const present = new Set(fleet.all().map((r) => r.name));
      for (const name of [...lagSeen.keys()]) if (!present.has(name)) lagSeen.delete(name);
    }
  };
  observeFleet();
  shutdown.addCloser("publish lag", async () => unobserveFleet());
  const unobserveFleet = fleet.onChange(observeFleet);

  // 6–7. Token and store.
  const token = await readSandboxdToken(config);
  if (!token) log.warn("no sandboxd token: node calls carry no Authorization header; deletes and lifecycle verbs will be refused by the nodes");
  const clients = new NodeClients(token, log.child({ component: "sandboxd" }));
  const reader = new SandboxReader(fleet, clients);
  const changes = new SandboxChanges({ fleet, sandboxesOf: (rec) => reader.sandboxesOf(rec), clock, log: log.child({ component: "watch" }) });
  shutdown.addCloser("watch changes", async () => changes.stop());

  // 8. Warm-pool driver (leader-elected; rebuilt 5 s after it stops).
  let driver: WarmPoolDriverHandle | undefined;
  let e2bPort: number | undefined;
  if (config.enableWarmPoolDriver) {
    driver = startWarmPoolDriver({ kube, fleet, clients, token, syncIntervalMs: config.warmPoolSyncInterval, clock, log: log.child({ component: "warmpool" }), metrics, env, demand, ...(o.autoscale ? { autoscale: o.autoscale } : {}) });
    shutdown.addCloser("warm-pool driver", () => driver!.stop());
  }

  // The canary (off unless --canary-interval): the users' path, per node and pooled key, on every replica.
  if (config.canaryInterval > 0) {
    const canary = new Canary({ fresh: () => fleet.fresh(), clients, rootToken: token, intervalMs: config.canaryInterval, clock, log: log.child({ component: "canary" }), metrics, demand });
    canary.start();
    shutdown.addCloser("canary", () => canary.stop());
  }

  // Events for sandbox transitions seen in inventory changes (docs/events.md), written by the driver's leader only.
  const eventSink = new NamespaceAwareSink(kubeEventSink(kube), clock);
  const sandboxEvents = new EventRecorder({ sink: eventSink, component: "sandbox-apiserver", host: hostname(), clock, isNotFound, log: log.child({ component: "events" }) });
  const stopEvents = startSandboxEvents({
    changes,
    writer: sandboxEvents,
    gate: new EventGate({ clock }),
    active: () => driver?.isLeader() ?? true,
    isMissingNamespace: (ns) => eventSink.isMissing(ns),
    counter: sandboxEventsCounter(metrics.registry),
    log: log.child({ component: "events" }),
  });
  shutdown.addCloser("sandbox events", async () => {
    stopEvents();
    await sandboxEvents.close();
  });

  // 9. The e2b surface on its own plain-HTTP listener, over the same inventory source (docs/architecture.md).
  if (config.enableE2bApi) {
    // The quota series name every namespace: they join this server's own /metrics (secure port, SubjectAccessReview
    // on non-resource /metrics), never the keyless e2b listener.
    // Its public-ports policy must match the proxies' (the chart feeds both from one value): the surface stamps it.
    const e2b = loadE2bSurface({ options: config.e2b, publicTraffic: config.publicTraffic, fleet, rootToken: token, log: log.child({ component: "e2b" }), metricsRegistry: metrics.registry });
    let e2bServer: ReturnType<typeof Bun.serve>;
    try {
      e2bServer = e2b.serve(config.e2b.bindAddress);
    } catch (e) {
      throw new StartupError(`listen on e2b address "${config.e2b.bindAddress}": ${(e as Error).message}`, { flag: "--e2b-bind-address" }, e);
    }
    shutdown.addListener("e2b surface", () => e2bServer.stop());
    e2bPort = e2bServer.port;
    log.info({ address: config.e2b.bindAddress, port: e2bServer.port }, "e2b surface listening");
  }

  // 10. Serving certificate and delegated authentication/authorization.
  const cert = await servingCertificate(config.serving);
  const authnClient = config.authentication.kubeconfig ? await kubeClientFrom(env, "--authentication-kubeconfig", log, config.authentication.kubeconfig) : kube;
  const authzClient = config.authorization.kubeconfig ? await kubeClientFrom(env, "--authorization-kubeconfig", log, config.authorization.kubeconfig) : kube;
  const sources = await loadAuthSources(config, authnClient, log);
  const verifier = new ClientCertVerifier(parseCertBundle(sources.requestHeaderCaPem), parseCertBundle(sources.clientCaPem));
  const authenticator = new Authenticator({
    requestHeader: sources.requestHeader,
    tokenReviewer: authnClient,
    cacheTtlMs: config.authentication.tokenWebhookCacheTtl,
    clock,
  });
  const authorizer = new Authorizer({
    reviewer: authzClient,
    alwaysAllowPaths: config.authorization.alwaysAllowPaths,
    allowedTtlMs: config.authorization.webhookCacheAuthorizedTtl,
    deniedTtlMs: config.authorization.webhookCacheUnauthorizedTtl,
    clock,
  });

  // 11. Serve.
  const stopping = new AbortController();
  const api = apiRoutes({
    reader,
    changes,
    create: {
      fresh: () => fleet.fresh(),
      clients,
      clock,
      log: log.child({ component: "create" }),
      onClaimed: (ns, name, id, node, key) => {
        reader.remember({ node, entry: { id, name: `${ns}/${name}` } }, ns);
        demand.recordClaim(key, id);
        metrics.claims.inc({ surface: "aggregated", outcome: "ok" });
      },
      onFailed: () => metrics.claims.inc({ surface: "aggregated", outcome: "error" }),
      staleCount: () => fleet.all().length - fleet.fresh().length,
      refillMs: (key) => demand.read(key).refillMs,
      onNoCapacity: (key) => demand.recordMiss(key),
    },
    podGuard: new PodGuard(kubePodGuardBackend(kube, authzClient)),
    subresourceReview: kubeSubresourceReview(authzClient),
    clock,
    log: log.child({ component: "api" }),
    shutdown: stopping.signal,
    version: () => versionInfo(),
  });
  const observability = observabilityRoutes({
    metrics,
    beforeScrape: () => {
      const fresh = fleet.fresh().length;
      metrics.inventoryNodes.set({ state: "fresh" }, fresh);
      metrics.inventoryNodes.set({ state: "stale" }, fleet.all().length - fresh);
      const freshNames = new Set(fleet.fresh().map((r) => r.name));
      metrics.hiddenSandboxes.set(hiddenByStale(fleet.all().filter((r) => !freshNames.has(r.name)).map((r) => r.fleet)));
      const newest = Math.max(0, ...fleet.all().map((r) => r.publishedAt ?? 0));
      if (newest > 0) metrics.inventoryNewestAge.set(Math.max(0, (clock.now() - newest) / 1000));
    },
    live: [
      { name: "ping", check: () => undefined },
      { name: "log", check: () => undefined },
    ],
    // No inventory check: the server only listens once the NodeInventory cache has synced (startup step 5).
    ready: [{ name: "shutdown", check: () => (stopping.signal.aborted ? "process is shutting down" : undefined) }],
    profiling: config.profiling,
  });
  if (needsLookup(config)) {
    const stopWatch = watchAuthSources(config, authnClient, log.child({ component: "authn" }), (s) => {
      verifier.update(parseCertBundle(s.requestHeaderCaPem), parseCertBundle(s.clientCaPem));
      authenticator.setRequestHeader(s.requestHeader);
    });
    shutdown.addCloser("authentication config watch", stopWatch);
  }
  const handler = createApp({ authenticator, authorizer, api, observability, metrics, log: log.child({ component: "http" }) });
  let server;
  try {
    server = await startSecureServer({
      bindAddress: config.serving.bindAddress,
      port: config.serving.securePort,
      certPem: cert.certPem,
      keyPem: cert.keyPem,
      verifier,
      ...(config.serving.tlsMinVersion ? { minVersion: config.serving.tlsMinVersion } : {}),
      cipherSuites: config.serving.tlsCipherSuites,
      handler,
      errorResponse: (code, message) => statusResponse(new ApiError(code, message)),
      maxBodyBytes: MAX_REQUEST_BODY_BYTES,
      isIdentityHeader: (name) => authenticator.isIdentityHeader(name),
      log: log.child({ component: "serving" }),
    });
  } catch (e) {
    throw new StartupError(`listen on ${config.serving.bindAddress}:${config.serving.securePort}: ${(e as Error).message}`, { flag: "--secure-port" });
  }
  // Readiness fails and watches end at the first signal; the listener closes after.
  shutdown.onDraining("readiness and open watches", () => stopping.abort());
  shutdown.addListener("secure port", () => server.stop());
  log.info({ port: server.port, bindAddress: config.serving.bindAddress }, "serving agents.x-k8s.io/v1beta1 sandboxes");
  return { port: server.port, fleet, metrics, ...(driver ? { driver } : {}), ...(e2bPort !== undefined ? { e2bPort } : {}) };
}

function versionInfo() {
  const [major = "0", minor = "0"] = buildInfo.version.replace(/^v/, "").split(".");
  return {
    major,
    minor,
    gitVersion: buildInfo.version.startsWith("v") ? buildInfo.version : `v${buildInfo.version}`,
    gitCommit: buildInfo.revision,
    gitTreeState: "clean",
    buildDate: buildInfo.builtAt,
    goVersion: `bun${Bun.version}`,
    compiler: "bun",
    platform: `${process.platform}/${process.arch}`,
  };
}
