// sandbox-apiserver entry point. Wiring only: flags, --help/--version, log level (OPERATOR_LOG_LEVEL), then
// startApiserver (wire.ts). Exit codes: 2 usage error, 1 any other fatal startup error, 0 after SIGTERM.
import { runMain } from "#shared/lifecycle/index.ts";
import { OPERATOR_LOG_LEVEL_ENV, apiserverHelp, checkApiserverConfig, parseApiserverFlags } from "./flags.ts";
import { startApiserver } from "./wire.ts";

await runMain({
  name: "sandbox-apiserver",
  logLevelEnv: OPERATOR_LOG_LEVEL_ENV,
  parse: parseApiserverFlags,
  help: apiserverHelp,
  async run({ config, log, shutdown, env }) {
    checkApiserverConfig(config);
    await startApiserver({ config, log, env, shutdown });
  },
});
