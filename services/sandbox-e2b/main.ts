// sandbox-e2b entry point. Wiring only: flags, --help/--version, log level, then the mesh-mode e2b
// surface. The mesh poller, the e2b app and the in-process proxy arrive in later issues; until then the
// binary validates its flags and says plainly that it cannot serve yet.
import { runMain } from "../../shared/lifecycle/index.ts";
import { OPERATOR_LOG_LEVEL_ENV, checkE2bMeshConfig, e2bMeshHelp, parseE2bMeshFlags } from "./flags.ts";

await runMain({
  name: "sandbox-e2b",
  logLevelEnv: OPERATOR_LOG_LEVEL_ENV,
  parse: parseE2bMeshFlags,
  help: e2bMeshHelp,
  run({ config, log }) {
    checkE2bMeshConfig(config);
    log.error(
      { seeds: config.sandboxdSeeds.length, bindAddress: config.e2b.bindAddress },
      "flags are valid, but the e2b surface of sandbox-e2b is not built yet; exiting",
    );
    return 1;
  },
});
