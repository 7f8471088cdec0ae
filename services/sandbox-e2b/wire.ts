// sandbox-e2b wiring (docs/e2b.md "Mesh mode"): the sandboxd-seed fleet view, the e2b surface on
// --e2b-bind-address and, with --envd-proxy-bind-address, the envd relay in the same process sharing the fleet
// view; a kill through the surface drops the relay's cached owner at once.
import { checkE2bMeshConfig, type E2bMeshConfig } from "./flags.ts";
import { StartupError } from "#shared/config/index.ts";
import { MeshFleet } from "#shared/fleet/index.ts";
import { loadE2bSurface, resolveRootToken } from "#shared/e2b/index.ts";
import { startMetricsListener } from "#shared/http/index.ts";
import type { Shutdown } from "#shared/lifecycle/index.ts";
import type { Logger } from "#shared/log/index.ts";
import { EnvdRelay, serveRelay, stopRelay } from "#shared/relay/index.ts";

export interface E2bMesh {
  e2bPort: number;
  /** The in-process envd proxy's port, when --envd-proxy-bind-address is set. */
  proxyPort: number | undefined;
  /** The metrics listener's port, when --metrics-bind-address is set. */
  metricsPort: number | undefined;
  fleet: MeshFleet;
  stop(): Promise<void>;
}

export async function startE2bMesh(config: E2bMeshConfig, log: Logger, shutdown?: Shutdown): Promise<E2bMesh> {
  checkE2bMeshConfig(config);
  const rootToken = resolveRootToken(config.sandboxdToken, config.sandboxdTokenFile);
  const fleet = new MeshFleet({ seeds: config.sandboxdSeeds, token: rootToken, pollMs: config.inventoryPoll, log: log.child({ component: "fleet" }) });
  // The in-process relay shares the fleet view; a claim through the surface tells it the owner at once, and a kill
  // drops it at once.
  let relay: EnvdRelay | undefined;
  const e2b = loadE2bSurface({
    options: config.e2b,
    fleet,
    rootToken,
    log,
    publicTraffic: config.publicTraffic,
    onReleased: (claimId) => relay?.dropOwner(claimId),
    onClaimed: (claimId, address, claimToken, namespace, publicTraffic) => relay?.primeOwner(claimId, address, claimToken, namespace, publicTraffic),
  });
  if (config.envdProxy) {
    relay = new EnvdRelay({ domain: config.e2b.domain, fleet, envdSecret: e2b.envdSecret, rootToken, namespace: "", guestHttp2: config.envdProxy.guestHttp2, limits: config.envdProxy.limits, publicTraffic: config.publicTraffic, api: async (req) => e2b.app.fetch(req), log: log.child({ component: "envd-proxy" }) });
  }
  await fleet.ready();
  shutdown?.addCloser("fleet", () => fleet.stop());
  let server: ReturnType<typeof Bun.serve>;
  try {
    server = e2b.serve(config.e2b.bindAddress);
  } catch (err) {
    await fleet.stop();
    throw new StartupError(`cannot listen on --e2b-bind-address ${config.e2b.bindAddress}: ${(err as Error).message}`, { flag: "--e2b-bind-address" }, err);
  }
  shutdown?.addListener("e2b", () => server.stop());
  log.info({ address: config.e2b.bindAddress, port: server.port, nodes: fleet.nodes().length }, "e2b surface listening");
  let proxyServer: ReturnType<typeof Bun.serve> | undefined;
  if (relay && config.envdProxy) {
    const p = config.envdProxy;
    try {
      proxyServer = serveRelay(relay, {
        address: p.bindAddress,
        ...(p.tlsCertFile ? { tlsCertFile: p.tlsCertFile } : {}),
        ...(p.tlsPrivateKeyFile ? { tlsPrivateKeyFile: p.tlsPrivateKeyFile } : {}),
        log: log.child({ component: "envd-proxy" }),
      });
    } catch (err) {
      await server.stop(true);
      await fleet.stop();
      throw new StartupError(`cannot listen on --envd-proxy-bind-address ${p.bindAddress}: ${(err as Error).message}`, { flag: "--envd-proxy-bind-address" }, err);
    }
    const ps = proxyServer;
    shutdown?.addListener("envd-proxy", () => stopRelay(ps));
    log.info({ address: p.bindAddress, port: ps.port, tls: Boolean(p.tlsCertFile) }, "envd proxy listening");
  }
  // One metrics listener for the process: the e2b surface's quota series (fleet-wide namespace names and counts, so
  // never on the keyless e2b listener) and the in-process proxy's.
  const metricsServer = await startMetricsListener({
    address: config.metricsBindAddress,
    registries: [e2b.surface.quotas.registry, ...(relay ? [relay.metrics.registry] : [])],
    log: log.child({ component: "metrics" }),
    shutdown,
    undo: async () => {
      await proxyServer?.stop(true);
      await server.stop(true);
      await fleet.stop();
    },
  });
  return {
    e2bPort: server.port!,
    proxyPort: proxyServer?.port,
    metricsPort: metricsServer?.port,
    fleet,
    stop: async () => {
      await metricsServer?.stop(true);
      await proxyServer?.stop(true);
      await server.stop(true);
      await fleet.stop();
    },
  };
}
