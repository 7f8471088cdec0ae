// sandbox-envd-proxy entry point. Wiring only: flags, --help/--version, log level, then the relay.
// The relay and its inventory source arrive in later issues; until then the binary validates its flags
// and says plainly that it cannot serve yet.
import { runMain } from "../../shared/lifecycle/index.ts";
import { OPERATOR_LOG_LEVEL_ENV, checkEnvdProxyConfig, envdProxyHelp, parseEnvdProxyFlags } from "./flags.ts";

await runMain({
  name: "sandbox-envd-proxy",
  logLevelEnv: OPERATOR_LOG_LEVEL_ENV,
  parse: parseEnvdProxyFlags,
  help: envdProxyHelp,
  run({ config, log }) {
    checkEnvdProxyConfig(config);
    log.error(
      { bindAddress: config.bindAddress, domain: config.domain },
      "flags are valid, but the relay of sandbox-envd-proxy is not built yet; exiting",
    );
    return 1;
  },
});
