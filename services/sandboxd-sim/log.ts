// sandboxd-sim — development substrate standing in for sandboxd (which needs KVM). Not product code.
//
// The simulator's one pino root, for what its listeners cannot answer (a handler that threw): a structured line on
// stderr rather than Bun's raw stack. Level from SANDBOXD_SIM_LOG_LEVEL (default warn: the simulator is quiet).
import { createLogger, parseLogLevel, type Logger } from "#shared/log/index.ts";

export const SIM_LOG_LEVEL_ENV = "SANDBOXD_SIM_LOG_LEVEL";

let root: Logger | undefined;

export function simLog(): Logger {
  root ??= createLogger({ level: process.env[SIM_LOG_LEVEL_ENV] ? parseLogLevel(process.env[SIM_LOG_LEVEL_ENV], SIM_LOG_LEVEL_ENV) : "warn", name: "sandboxd-sim" });
  return root;
}
