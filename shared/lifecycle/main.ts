// What every entry point does before its own wiring, in the order the specs make observable:
//   1. flags (usage error → exit 2; --help → table on stdout, exit 0; --version → line, exit 0, no I/O);
//   2. the root logger from the binary's level variable (unknown level → one line, exit 1);
//   3. a start line with the build identity; SIGINT/SIGTERM wired to the staged shutdown;
//   4. the binary's run(): a StartupError or any other throw → one error line, exit 1. A returned
//      number exits with it; returning nothing leaves the process serving until a signal.
import { isStartupError, isUsageError, type CliOutcome, type Env } from "../config/index.ts";
import { createLogger, createRootLogger, type LogDestination, type Logger } from "../log/index.ts";
import { buildInfo, versionLine } from "../version.ts";
import { Shutdown, type ShutdownOptions } from "./shutdown.ts";

export interface RunContext<C> {
  config: C;
  log: Logger;
  shutdown: Shutdown;
  env: Env;
}

export interface MainSpec<C> {
  name: string;
  /** VK_LOG_LEVEL or OPERATOR_LOG_LEVEL. */
  logLevelEnv: string;
  parse(argv: readonly string[], env: Env): CliOutcome<C>;
  help(): string;
  run(ctx: RunContext<C>): Promise<number | void> | number | void;
  shutdown?: Omit<ShutdownOptions, "logger">;
  /** Injection points for tests; default to the real process. */
  argv?: readonly string[];
  env?: Env;
  stdout?: (text: string) => void;
  stderr?: (text: string) => void;
  logDestination?: LogDestination;
  exit?: (code: number) => void;
}

export async function runMain<C>(spec: MainSpec<C>): Promise<number | undefined> {
  const argv = spec.argv ?? process.argv.slice(2);
  const env = spec.env ?? (process.env as Env);
  const stdout = spec.stdout ?? ((text) => process.stdout.write(text));
  const stderr = spec.stderr ?? ((text) => process.stderr.write(text));
  const exit = spec.exit ?? ((code) => process.exit(code));

  let outcome: CliOutcome<C>;
  try {
    outcome = spec.parse(argv, env);
  } catch (err) {
    if (isUsageError(err)) {
      stderr(`${spec.name}: ${err.message}\nRun '${spec.name} --help' for the flag table.\n`);
      exit(2);
      return 2;
    }
    throw err;
  }
  if (outcome.kind === "help") {
    stdout(spec.help());
    exit(0);
    return 0;
  }
  if (outcome.kind === "version") {
    stdout(`${versionLine(spec.name)}\n`);
    exit(0);
    return 0;
  }

  let log: Logger;
  try {
    log = createRootLogger({
      name: spec.name,
      levelEnv: spec.logLevelEnv,
      env,
      ...(spec.logDestination ? { destination: spec.logDestination } : {}),
    });
  } catch (err) {
    // No usable level: report through a logger at info so the line is still one JSON object on stderr.
    const fallback = createLogger({
      level: "info",
      name: spec.name,
      ...(spec.logDestination ? { destination: spec.logDestination } : {}),
    });
    fallback.error((err as Error).message);
    exit(1);
    return 1;
  }

  log.info({ version: buildInfo.version, revision: buildInfo.revision, builtAt: buildInfo.builtAt }, "starting");
  const shutdown = new Shutdown({ ...(spec.shutdown ?? {}), logger: log, exit });
  shutdown.install();
  try {
    const code = await spec.run({ config: outcome.config, log, shutdown, env });
    if (typeof code === "number") {
      shutdown.uninstall();
      exit(code);
      return code;
    }
    return undefined;
  } catch (err) {
    if (isStartupError(err)) log.error({ ...err.context, ...(err.cause ? { err: err.cause } : {}) }, err.message);
    else log.error({ err }, `fatal: ${(err as Error)?.message ?? String(err)}`);
    shutdown.uninstall();
    exit(1);
    return 1;
  }
}
