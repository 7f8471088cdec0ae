// sandbox-envd-proxy wiring (docs/envd-relay.md "Startup"): the checks that need no network, the envd secret and
// the root token, the Kubernetes NodeInventory fleet view (synced within a bounded wait, naming the CRD when it
// does not), then the relay listener. Every failure is a StartupError naming the flag or file (exit 1).
import { StartupError, type Env } from "#shared/config/index.ts";
import { readEnvdSecret, resolveRootToken } from "#shared/e2b/index.ts";
import { InventoryFleet } from "#shared/fleet/index.ts";
import { KubeClient } from "#shared/kube/index.ts";
import { KubeConfigError, loadKubeConnection } from "#shared/kube/index.ts";
import type { Shutdown } from "#shared/lifecycle/index.ts";
import { errorChain, type Logger } from "#shared/log/index.ts";
import { startMetricsListener } from "#shared/http/index.ts";
import { EnvdRelay, serveRelay, stopRelay, upstreamApi } from "#shared/relay/index.ts";
import { buildInfo } from "#shared/version.ts";
import { checkEnvdProxyConfig, type EnvdProxyConfig } from "./flags.ts";

/** What a programmatic caller may set beyond the flags (the seed's flag table is the binary's whole --help). */
export interface EnvdProxyStartOptions {
  /**
   * How long startup waits for the NodeInventory cache before failing with the CRD hint; default 2 min
   * (docs/envd-relay.md "Startup"). An embedding program or a test that expects the failure shortens it.
   */
  inventorySyncTimeoutMs?: number;
}

export interface RunningProxy {
  port: number;
  /** The metrics listener's port, when --metrics-bind-address is set. */
  metricsPort: number | undefined;
  relay: EnvdRelay;
  stop(): Promise<void>;
}

export async function startEnvdProxy(
  config: EnvdProxyConfig,
  log: Logger,
  env: Env,
  shutdown?: Shutdown,
  options: EnvdProxyStartOptions = {},
): Promise<RunningProxy> {
  checkEnvdProxyConfig(config);
  const envdSecret = readEnvdSecret(config.e2bEnvdSecretFile!);
  const rootToken = resolveRootToken(config.sandboxdToken, config.sandboxdTokenFile);
  if (rootToken === "") throw new StartupError("the node token is required: --sandboxd-token-file is empty", { flag: "--sandboxd-token-file" });

  let client: KubeClient;
  try {
    client = new KubeClient(await loadKubeConnection(env), { userAgent: `sandbox-envd-proxy/${buildInfo.version}`, log: log.child({ component: "kube" }) });
  } catch (err) {
    if (err instanceof KubeConfigError) throw new StartupError(`load kube config: ${err.message}`, {});
    throw err;
  }
  const fleet = new InventoryFleet({
    client,
    staleAfterMs: config.inventoryStaleAfter,
    trustedNetworks: config.inventoryTrustedNetworks,
    log: log.child({ component: "inventory" }),
    ...(options.inventorySyncTimeoutMs !== undefined ? { syncTimeoutMs: options.inventorySyncTimeoutMs } : {}),
  });
  try {
    await fleet.ready();
  } catch (err) {
    await fleet.stop();
    throw new StartupError((err as Error).message, { resource: "nodeinventories.sandbox.cocoonstack.io" });
  }
  const relay = new EnvdRelay({
    domain: config.domain,
    fleet,
    envdSecret,
    rootToken,
    namespace: config.namespace,
    guestHttp2: config.guestHttp2,
    limits: config.limits,
    publicTraffic: config.publicTraffic,
    ...(config.e2bApiUpstream ? { api: upstreamApi(config.e2bApiUpstream, (err) => log.warn({ upstream: config.e2bApiUpstream, err: errorChain(err) }, "e2b API upstream failed")) } : {}),
    log: log.child({ component: "relay" }),
  });
  let server: ReturnType<typeof Bun.serve>;
  try {
    server = serveRelay(relay, {
      address: config.bindAddress,
      ...(config.tlsCertFile ? { tlsCertFile: config.tlsCertFile } : {}),
      ...(config.tlsPrivateKeyFile ? { tlsPrivateKeyFile: config.tlsPrivateKeyFile } : {}),
      log: log.child({ component: "relay" }),
    });
  } catch (err) {
    await fleet.stop();
    throw new StartupError(`cannot listen on --bind-address ${config.bindAddress}: ${(err as Error).message}`, { flag: "--bind-address" }, err);
  }
  const metrics = await startMetricsListener({
    address: config.metricsBindAddress,
    registries: [relay.metrics.registry],
    log: log.child({ component: "metrics" }),
    shutdown,
    undo: async () => {
      await server.stop(true);
      await fleet.stop();
    },
  });
  shutdown?.addListener("envd-proxy", () => stopRelay(server));
  shutdown?.addCloser("inventory", () => fleet.stop());
  log.info({ address: config.bindAddress, port: server.port, tls: Boolean(config.tlsCertFile), nodes: fleet.nodes().length }, "envd proxy listening");
  return {
    port: server.port!,
    metricsPort: metrics?.port,
    relay,
    stop: async () => {
      await metrics?.stop(true);
      await server.stop(true);
      await fleet.stop();
    },
  };
}
