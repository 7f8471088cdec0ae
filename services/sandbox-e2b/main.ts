// sandbox-e2b entry point. Wiring only: flags, --help/--version, log level, then the mesh-mode e2b surface
// (services/sandbox-e2b/wire.ts).
import { runMain } from "#shared/lifecycle/index.ts";
import { OPERATOR_LOG_LEVEL_ENV, e2bMeshHelp, parseE2bMeshFlags } from "./flags.ts";
import { startE2bMesh } from "./wire.ts";

await runMain({
  name: "sandbox-e2b",
  logLevelEnv: OPERATOR_LOG_LEVEL_ENV,
  parse: parseE2bMeshFlags,
  help: e2bMeshHelp,
  async run({ config, log, shutdown }) {
    await startE2bMesh(config, log, shutdown);
  },
});
