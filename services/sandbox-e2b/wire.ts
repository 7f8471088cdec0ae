// sandbox-e2b wiring (docs/e2b.md "Mesh mode"): the sandboxd-seed fleet view, the e2b surface on
// --e2b-bind-address and, with --envd-proxy-bind-address, the envd relay in the same process sharing the fleet
// view; a kill through the surface drops the relay's cached owner at once.
import { checkE2bMeshConfig, type E2bMeshConfig } from "./flags.ts";
import { StartupError } from "../../shared/config/errors.ts";
import { MeshFleet } from "../../shared/fleet/mesh.ts";
import { loadE2bSurface, resolveRootToken } from "../../shared/e2b/index.ts";
import type { Shutdown } from "../../shared/lifecycle/shutdown.ts";
import type { Logger } from "../../shared/log/index.ts";

export interface E2bMesh {
  e2bPort: number;
  /** The in-process envd proxy's port, when --envd-proxy-bind-address is set. */
  proxyPort: number | undefined;
  stop(): Promise<void>;
}

export async function startE2bMesh(config: E2bMeshConfig, log: Logger, shutdown?: Shutdown): Promise<E2bMesh> {
  checkE2bMeshConfig(config);
  const rootToken = resolveRootToken(config.sandboxdToken, config.sandboxdTokenFile);
  const fleet = new MeshFleet({ seeds: config.sandboxdSeeds, token: rootToken, pollMs: config.inventoryPoll, log: log.child({ component: "fleet" }) });
  const e2b = loadE2bSurface({ options: config.e2b, fleet, rootToken, log });
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
  return {
    e2bPort: server.port!,
    proxyPort: undefined,
    stop: async () => {
      await server.stop(true);
      await fleet.stop();
    },
  };
}
