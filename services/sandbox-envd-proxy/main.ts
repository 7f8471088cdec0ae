// sandbox-envd-proxy entry point. Wiring only: flags, --help/--version, log level, then the relay
// (services/sandbox-envd-proxy/wire.ts).
import { runMain } from "#shared/lifecycle/index.ts";
import { OPERATOR_LOG_LEVEL_ENV, envdProxyHelp, parseEnvdProxyFlags } from "./flags.ts";
import { startEnvdProxy } from "./wire.ts";

await runMain({
  name: "sandbox-envd-proxy",
  logLevelEnv: OPERATOR_LOG_LEVEL_ENV,
  parse: parseEnvdProxyFlags,
  help: envdProxyHelp,
  async run({ config, log, env, shutdown }) {
    await startEnvdProxy(config, log, env, shutdown);
  },
});
