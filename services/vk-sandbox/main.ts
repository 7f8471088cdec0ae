// vk-sandbox: flags and environment to modules, start, signals, exit. Nothing else lives here (style item 1).
// Exit codes: 2 for a usage error (unknown flag, unparsable value), 1 for every other fatal startup error with one
// log line naming the flag or file, 0 after SIGINT/SIGTERM. Startup order: §1.1; steps 5–11 are in wire.ts.
import { isUsageError } from "#shared/config/index.ts";
import { Shutdown } from "#shared/lifecycle/index.ts";
import { createLogger, parseLogLevel } from "#shared/log/index.ts";
import { versionLine } from "#shared/version.ts";
import { parseVkSandboxFlags, VK_LOG_LEVEL_ENV, vkSandboxHelp } from "./flags.ts";
import { startVkSandbox } from "./wire.ts";

async function main(argv: string[], env: Record<string, string | undefined>): Promise<number | undefined> {
  // 1. Flags; --version exits with no I/O. 3. An empty --state-path is refused by the parser.
  let outcome;
  try {
    outcome = parseVkSandboxFlags(argv, env);
  } catch (e) {
    if (!isUsageError(e)) throw e;
    process.stderr.write(`vk-sandbox: ${e.message}\n\n${vkSandboxHelp()}\n`);
    return 2;
  }
  if (outcome.kind === "help") {
    process.stdout.write(`${vkSandboxHelp()}\n`);
    return 0;
  }
  if (outcome.kind === "version") {
    process.stdout.write(`${versionLine("vk-sandbox")}\n`);
    return 0;
  }

  // 2. Log level; an unknown one stops startup.
  let level;
  try {
    level = parseLogLevel(env[VK_LOG_LEVEL_ENV], VK_LOG_LEVEL_ENV);
  } catch (e) {
    process.stderr.write(`vk-sandbox: ${(e as Error).message}\n`);
    return 1;
  }
  const log = createLogger({ level, name: "vk-sandbox" });

  // 4. SIGINT/SIGTERM stop everything started so far; nothing is released and the Node stays (§1.3).
  const shutdown = new Shutdown({ logger: log });
  shutdown.install();

  try {
    await startVkSandbox({ config: outcome.config, log, env, shutdown });
  } catch (e) {
    if (shutdown.draining) return undefined; // a signal arrived mid-startup; the shutdown decides the code
    log.error({ err: e }, (e as Error).message);
    return 1;
  }
  return undefined; // runs until a signal; Shutdown exits the process
}

const code = await main(process.argv.slice(2), process.env);
if (code !== undefined) process.exit(code);
