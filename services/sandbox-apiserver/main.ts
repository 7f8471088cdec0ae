// sandbox-apiserver entry point. Wiring only: flags, --help/--version, log level, then the server.
// The serving part (inventory cache, aggregated API, warm-pool driver, e2b surface) arrives in later
// issues; until then the binary validates its flags and says plainly that it cannot serve yet.
import { runMain } from "../../shared/lifecycle/index.ts";
import { OPERATOR_LOG_LEVEL_ENV, apiserverHelp, checkApiserverConfig, parseApiserverFlags } from "./flags.ts";

await runMain({
  name: "sandbox-apiserver",
  logLevelEnv: OPERATOR_LOG_LEVEL_ENV,
  parse: parseApiserverFlags,
  help: apiserverHelp,
  run({ config, log }) {
    checkApiserverConfig(config);
    log.error(
      { securePort: config.serving.securePort, enableE2bApi: config.enableE2bApi },
      "flags are valid, but the serving part of sandbox-apiserver is not built yet; exiting",
    );
    return 1;
  },
});
