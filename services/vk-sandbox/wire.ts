// Builds and starts the daemon from its parsed configuration, in the observable order of §1.1 (steps 5–11).
// main.ts owns steps 1–4 (flags, log level, state path, signals) and the exit codes; this file owns which module
// gets which client and what runs first. Every module it starts is registered with the shutdown as it starts, so
// a fatal error half-way still stops what already runs.
import { readFile } from "node:fs/promises";
import { availableParallelism } from "node:os";
import type { V1Pod } from "@kubernetes/client-node";
import type { Clock } from "#shared/clock/index.ts";
import { StartupError } from "#shared/config/index.ts";
import { KubeClient } from "#shared/kube/index.ts";
import { bunTransport } from "#shared/kube/index.ts";
import { loadKubeConnection } from "#shared/kube/index.ts";
import { isConflict, isNotFound, KubeApiError } from "#shared/kube/index.ts";
import { EventRecorder, kubeEventSink } from "#shared/kube/index.ts";
import { Informer } from "#shared/kube/index.ts";
import { limiterFromFlags, rateFromFlags, TokenBucket } from "#shared/kube/index.ts";
import { Pods } from "#shared/kube/index.ts";
import type { Shutdown } from "#shared/lifecycle/index.ts";
import type { Logger } from "#shared/log/index.ts";
import { SandboxdClient } from "#shared/sandboxd/index.ts";
import { isClaimsStateError } from "./claims/index.ts";
import { ClaimsFile, ClaimsStore } from "./claims/index.ts";
import type { VkSandboxConfig } from "./flags.ts";
import { InventoryPublisher } from "./inventory/index.ts";
import { VkSandboxMetrics } from "./metrics.ts";
import { createKubeletApp, guardKubeletApi, kubeletBindHost, kubeletDelegation, kubeletTlsPair, serveKubeletApi } from "./kubelet-api/index.ts";
import { REVIEW_BURST, REVIEW_QPS } from "./kubelet-api/index.ts";
import { LeaseController, NodeController } from "./node/index.ts";
import { PodController } from "./pods/index.ts";
import type { PodSource, PodWriter } from "./pods/index.ts";
import { createSandboxProvider, isSandboxdOutage, isTransientForHeldClaim, type OwnerReader } from "./provider/index.ts";
import type { SandboxClaimer, SandboxLister, SandboxReader, SandboxReleaser } from "./provider/index.ts";

/** sandboxd HTTP client request timeout (§1.1 step 6). */
const SANDBOXD_TIMEOUT_MS = 10_000;

export interface WireDeps {
  config: VkSandboxConfig;
  log: Logger;
  env: Record<string, string | undefined>;
  shutdown: Shutdown;
  /**
   * The time the provider's loops and the pod queues run on. main passes nothing (real time); an in-process
   * test passes a fake clock shared with the sandboxd simulator to run a 10-minute outage in milliseconds.
   * Kubernetes heartbeats (Node, Lease) and request timeouts stay on real time.
   */
  clock?: Clock;
}

/** What a running daemon exposes to main and to in-process tests and benchmarks. */
export interface VkSandbox {
  kube: KubeClient;
  pods: PodController;
  node: NodeController;
  kubeletPort: number;
}

/**
 * Workers per pod queue. virtual-kubelet uses the CPU count, which on a production node (dozens of cores) means
 * dozens of requests in flight. Our handlers are async, so a worker is one request in flight, not a thread, and
 * on a 2-core machine the CPU count capped the node at two concurrent claims: the claims table's group commit then
 * wrote the whole table for every one or two claims. The floor of 16 was measured: sustained pods/s under
 * qps 200 went from 90 to 155 on 2 cores (tests/bench/RESULTS.md).
 */
export function podWorkers(cpus = availableParallelism()): number {
  return Math.max(cpus, 16);
}

export async function startVkSandbox(d: WireDeps): Promise<VkSandbox> {
  const { config: cfg, log, shutdown } = d;

  // 5. Kube config. One token bucket shared by every Kubernetes client of the process (node, lease, pod status,
  // pod delete, events, owner reads, inventory): the operator's --kube-api-qps/--kube-api-burst is then a bound
  // on what this node costs the apiserver, which is what it is for. (Go gave the dynamic and inventory clients
  // buckets of their own; a shared one is stricter and only slows owner reads during a status storm.)
  const conn = await loadKubeConnection(d.env).catch((e) => {
    throw new StartupError(`kube config: ${(e as Error).message}`);
  });
  // The daemon's own metrics (metrics.ts), served at /metrics on the kubelet port: every seam below is counted.
  const metrics = new VkSandboxMetrics();
  const kube = new KubeClient(conn, {
    transport: metrics.kubeTransport(bunTransport(conn)),
    limiter: limiterFromFlags(cfg.kubeApiQps, cfg.kubeApiBurst),
    userAgent: `vk-sandbox/${cfg.nodeName}`,
    log: log.child({ component: "kube" }),
  });

  // 6. sandboxd: token file read once (rotation needs a restart).
  let token: string | undefined;
  if (cfg.sandboxdTokenFile) {
    try {
      token = (await readFile(cfg.sandboxdTokenFile, "utf8")).trim();
    } catch (e) {
      throw new StartupError(`--sandboxd-token-file ${cfg.sandboxdTokenFile}: ${(e as Error).message}`);
    }
  }
  const sandboxd = new SandboxdClient({
    baseUrl: cfg.sandboxdUrl,
    token,
    timeoutMs: SANDBOXD_TIMEOUT_MS,
    log: log.child({ component: "sandboxd" }),
  });

  // Pod events: the pod controller's, and the provider's own SandboxLost warnings.
  const events = new EventRecorder({
    sink: kubeEventSink(kube),
    component: `${cfg.nodeName}/pod-controller`,
    host: cfg.nodeName,
    dropNormal: cfg.disablePodEvents,
    isNotFound,
    log: log.child({ component: "events" }),
  });
  // 7. Provider: load, quarantine, verify once, write once. A failure here is fatal and happens before any Node
  // exists, so a node without durable claims never enters scheduling.
  const handle = createSandboxProvider({
    nodeName: cfg.nodeName,
    ...sandboxdSlices(metrics.sandboxd(sandboxd)),
    ownerReader: ownerReaderFor(kube),
    store: new ClaimsStore(metrics.claimsFile(new ClaimsFile({ path: cfg.statePath }))),
    log,
    clock: d.clock,
    events: { warning: (pod, reason, message) => events.warning(pod, reason, message) },
    intervals: { orphanScanMs: cfg.orphanScanInterval },
  });
  try {
    await handle.ready;
  } catch (e) {
    // A ClaimsStateError already says "claims state is …: <path>: …"; prefixing it again doubled the path.
    if (isClaimsStateError(e)) throw new StartupError(e.message, {}, e);
    throw new StartupError(`claims state ${cfg.statePath}: ${(e as Error).message}`);
  }
  shutdown.addCloser("provider", () => handle.stop());

  // 8. Kubelet TLS: the given pair or a self-signed one (fatal on a bad pair).
  const tls = await kubeletTlsPair({ tlsCert: cfg.tlsCert, tlsKey: cfg.tlsKey, nodeName: cfg.nodeName, nodeIp: cfg.nodeIp }).catch((e) => {
    throw new StartupError(`kubelet TLS: ${(e as Error).message}`);
  });
  let clientCaPem: string | undefined;
  if (cfg.clientCaFile) {
    clientCaPem = await readFile(cfg.clientCaFile, "utf8").catch((e) => {
      throw new StartupError(`--client-ca-file ${cfg.clientCaFile}: ${(e as Error).message}`);
    });
    if (!clientCaPem.includes("-----BEGIN CERTIFICATE-----")) throw new StartupError(`--client-ca-file ${cfg.clientCaFile}: no PEM certificate in the file`);
  } else {
    log.warn({}, "no --client-ca-file: the kubelet API accepts only bearer tokens, so kube-apiserver's kubectl logs/exec get 401");
  }

  // 9. Capacity quantities were validated by the flag parser; the node object takes their canonical text.
  const node = new NodeController({
    client: kube,
    log: log.child({ component: "node" }),
    spec: {
      nodeName: cfg.nodeName,
      nodeIp: cfg.nodeIp,
      kubeletPort: cfg.listenPort,
      cpu: cfg.nodeCpu.string,
      memory: cfg.nodeMemory.string,
      pods: cfg.nodePods.string,
      extraLabels: cfg.nodeLabels,
    },
  });

  // 10. Provider loops, then the inventory publisher (immediate, then every interval).
  handle.start();
  if (cfg.publishInventory) {
    const publisher = new InventoryPublisher({
      kube,
      sandboxd,
      nodeName: cfg.nodeName,
      address: cfg.sandboxdAdvertiseAddr,
      ownAddresses: () => handle.impl.ownAddresses(),
      nodeGone: () => node.gone,
      intervalMs: cfg.publishInterval,
      log: log.child({ component: "inventory" }),
      format: cfg.inventoryFormat,
      warnObjectBytes: cfg.inventoryWarnBytes,
      // The size warning's Event goes on the Node (namespace default, as the kubelet's node events do).
      events: new EventRecorder({
        sink: kubeEventSink(kube),
        component: `${cfg.nodeName}/inventory`,
        host: cfg.nodeName,
        isNotFound,
        log: log.child({ component: "inventory-events" }),
      }),
      observe: (sizes) => metrics.observeInventory(sizes),
    });
    publisher.start();
    shutdown.addCloser("inventory", () => publisher.stop());
  }

  // 11. Library layer: HTTPS → pod informer → cache sync → dangling pass → workers → Node → Lease → Ready.
  const informer = new Informer<V1Pod>(kube, Pods, {
    fieldSelector: `spec.nodeName=${cfg.nodeName}`,
    log: log.child({ component: "pod-informer" }),
  });
  // Every route behind TokenReview/client certificate and a SubjectAccessReview on nodes/<sub> (kubelet-api/guard.ts).
  // Each review kind has a client and bucket of its own (kubelet-api/delegation.ts): an anonymous TokenReview flood
  // never delays the SubjectAccessReviews of the kube-apiserver's own `kubectl logs/exec`.
  const reviewClient = (kind: string, limiter?: TokenBucket) =>
    new KubeClient(conn, {
      transport: metrics.kubeTransport(bunTransport(conn)),
      ...(limiter ? { limiter } : {}),
      userAgent: `vk-sandbox/${cfg.nodeName}/kubelet-api`,
      log: log.child({ component: "kubelet-api-reviews", reviews: kind }),
    });
  const reviews = { tokens: reviewClient("tokens"), access: reviewClient("access", new TokenBucket(REVIEW_QPS, REVIEW_BURST)) };
  const app = createKubeletApp({ listPods: () => informer.list(), runningPods: () => handle.provider.getPods(), metrics: () => metrics.exposition() });
  const apiLog = log.child({ component: "kubelet-api" });
  const bindHost = kubeletBindHost(cfg.listenAddr, cfg.nodeIp);
  let server;
  try {
    server = await serveKubeletApi({
      handler: guardKubeletApi({ ...kubeletDelegation(reviews, cfg.nodeName), fetch: (req) => app.fetch(req), log: apiLog }),
      tls,
      clientCaPem,
      hostname: bindHost,
      port: cfg.listenPort,
      log: apiLog,
    });
  } catch (e) {
    // With no host in --listen-addr the port binds --node-ip (kubelet-api/bind.ts): name both when that fails.
    const via = bindHost === cfg.nodeIp && !cfg.listenAddr.startsWith(`${cfg.nodeIp}:`) ? ` (bound to --node-ip ${cfg.nodeIp})` : "";
    throw new StartupError(`--listen-addr ${cfg.listenAddr}${via}: ${(e as Error).message}`);
  }
  shutdown.addListener("kubelet-api", () => server.stop());

  const pods = new PodController({
    nodeName: cfg.nodeName,
    provider: handle.provider,
    pods: podSource(informer),
    api: podWriter(kube),
    errors: { isNotFound, isConflict },
    events,
    log: log.child({ component: "pod-controller" }),
    workers: podWorkers(),
    onQueueWait: (queue, ms) => metrics.queueWaitSeconds.observe({ queue }, ms / 1000),
    onPodRunning: (ms) => metrics.podRunningSeconds.observe(ms / 1000),
    // The same flags, read the same way as the client's limiter: 0 → 5/10, qps < 0 → none (per-item backoff only).
    rate: rateFromFlags(cfg.kubeApiQps, cfg.kubeApiBurst),
    isTransient: isTransientForHeldClaim,
    isOutage: isSandboxdOutage,
    clock: d.clock,
  });
  // Closers run in reverse: the queues stop before the informer, the recorder last of the three.
  shutdown.addCloser("events", () => events.close());
  shutdown.addCloser("pod-informer", () => informer.stop());
  shutdown.addCloser("pod-controller", () => pods.stop());
  metrics.watchQueues([pods.syncQueue, pods.deleteQueue, pods.statusQueue]);
  await pods.start();

  await node.ensure().catch((e) => {
    throw new StartupError(`node ${cfg.nodeName}: ${(e as Error).message}`);
  });
  node.start();
  shutdown.addCloser("node", () => node.stop());
  const lease = new LeaseController({
    client: kube,
    nodeName: cfg.nodeName,
    nodeRef: () => node.nodeRef(),
    nodeGone: () => node.gone,
    log: log.child({ component: "lease" }),
  });
  lease.start();
  shutdown.addCloser("lease", () => lease.stop());
  await node.markReady();
  log.info({ node: cfg.nodeName, port: server.port }, "vk-sandbox ready");
  return { kube, pods, node, kubeletPort: server.port };
}

/** The four sandboxd slices the provider consumes, all served by one (instrumented) client. */
function sandboxdSlices<T extends SandboxClaimer & SandboxReleaser & SandboxLister & SandboxReader>(c: T) {
  return { claimer: c, releaser: c, lister: c, reader: c };
}

function podSource(informer: Informer<V1Pod>): PodSource {
  return {
    get: (k) => informer.get(k),
    list: () => informer.list(),
    onAdd: (fn) => informer.onAdd(fn),
    onUpdate: (fn) => informer.onUpdate(fn),
    onDelete: (fn) => informer.onDelete(fn),
    async startAndSync() {
      informer.start();
      await informer.synced;
    },
  };
}

/** The two pod writes of the controller (exported for the real-apiserver test of their preconditions). */
export function podWriter(kube: KubeClient): PodWriter {
  return {
    updateStatus: (pod) => kube.update<V1Pod>(Pods, pod, { namespace: pod.metadata?.namespace, subresource: "status" }),
    forceDelete: (namespace, name, uid) => kube.delete(Pods, name, { namespace, gracePeriodSeconds: 0, preconditions: { uid } }),
  };
}

/**
 * The delete-authorization owner read (§5.5): GET the controller owner in the Pod's namespace with no
 * resourceVersion. A 404 is reported with its Status `details.name`, which is what tells "this object is gone"
 * from "this resource path does not exist" (an unknown CRD). Never throws.
 */
export function ownerReaderFor(kube: KubeClient): OwnerReader {
  return async (ref, namespace) => {
    const res = { group: ref.group, version: ref.version, resource: ref.resource, namespaced: true };
    try {
      const object = await kube.get<object>(res, ref.name, { namespace });
      return { outcome: "found", object };
    } catch (e) {
      if (isNotFound(e)) return { outcome: "not-found", detailsName: e instanceof KubeApiError ? e.details?.name : undefined };
      return { outcome: "error", error: e };
    }
  };
}
