// The one pino root per process: JSON lines to stderr, level from the binary's environment variable
// (VK_LOG_LEVEL for vk-sandbox, OPERATOR_LOG_LEVEL for the others), and credentials scrubbed from every
// line. Modules take a Logger and make children with bound fields (`pod`, `claimId`, `sandboxId`).
import pino from "pino";
import { StartupError } from "../config/index.ts";
import { prettyDestination } from "./pretty.ts";
import { REDACTED, scrubString, scrubValue, serializeError } from "./redact.ts";

export { errorChain, errorMessage } from "./error-message.ts";

export type Logger = pino.Logger;

/**
 * The four methods a component logs with. A pino Logger satisfies it; unit tests pass a quiet or recording object.
 * Components that only log take this, not the pino type, so their tests need no pino.
 */
export interface Log {
  debug(obj: object, msg: string): void;
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}
export type LogLevel = "debug" | "info" | "warn" | "error";
export const LOG_LEVELS: readonly LogLevel[] = ["debug", "info", "warn", "error"];

/** Anything pino can write a line to; `{ write(line) }` is enough (tests pass an array-backed sink). */
export interface LogDestination {
  write(line: string): unknown;
}

/**
 * Reads the level from its environment variable. Unset or empty means info; any letter case is accepted
 * (docs/decisions.md#log-level-case); anything else is a StartupError naming the variable (exit 1, "setup log: …").
 */
export function parseLogLevel(raw: string | undefined, envVar: string): LogLevel {
  if (raw === undefined || raw === "") return "info";
  const level = raw.toLowerCase();
  if ((LOG_LEVELS as readonly string[]).includes(level)) return level as LogLevel;
  throw new StartupError(
    `setup log: unknown log level ${JSON.stringify(raw)} in ${envVar} (want debug, info, warn or error)`,
    { env: envVar, value: raw },
  );
}

// Path-based redaction for the shapes we know; the scrubbing hooks below catch the rest.
const REDACT_PATHS = [
  "token",
  "password",
  "secret",
  "apiKey",
  "authorization",
  "*.token",
  "*.password",
  "*.secret",
  "*.apiKey",
  "*.authorization",
  "headers.authorization",
  "headers.Authorization",
  'headers["x-api-key"]',
  'headers["x-access-token"]',
  "req.headers.authorization",
  "req.headers.cookie",
  'req.headers["x-api-key"]',
  'req.headers["x-access-token"]',
];

export interface LoggerOptions {
  level: LogLevel;
  /** Bound to every line as `name`. */
  name?: string;
  /** Defaults to a synchronous stderr writer, so a fatal line is on disk before process.exit. */
  destination?: LogDestination;
  /** Readable text instead of JSON. Defaults to true only for the default destination on a terminal. */
  pretty?: boolean;
  /** Extra fields bound to every line. */
  base?: Record<string, unknown>;
}

// pino serializes child bindings once, without the log formatter, so they are scrubbed on the way in.
// Children inherit the root's `child` through pino's prototype chain, so patching the root covers them.
function scrubbingChildren(logger: Logger): Logger {
  const original = logger.child;
  logger.child = function child(this: Logger, bindings, options) {
    return original.call(this, scrubValue(bindings) as pino.Bindings, options);
  } as Logger["child"];
  return logger;
}

export function createLogger(options: LoggerOptions): Logger {
  const raw = options.destination ?? pino.destination({ dest: 2, sync: true });
  const pretty = options.pretty ?? (options.destination === undefined && process.stderr.isTTY === true);
  const destination = pretty ? prettyDestination(raw) : raw;
  const root = pino(
    {
      level: options.level,
      base: { ...(options.name ? { name: options.name } : {}), ...(options.base ?? {}) },
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: { paths: REDACT_PATHS, censor: REDACTED },
      formatters: {
        level: (label) => ({ level: label }),
        bindings: (bindings) => scrubValue(bindings) as Record<string, unknown>,
        log: (object) => scrubValue(object) as Record<string, unknown>,
      },
      serializers: {
        err: (err: unknown) => (err instanceof Error ? serializeError(err) : scrubValue(err)),
      },
      hooks: {
        // Message strings and format arguments are scrubbed here; merge objects again in formatters.log.
        logMethod(args, method) {
          const scrubbed = args.map((arg, i) => {
            if (typeof arg === "string") return scrubString(arg);
            if (i === 0 && arg instanceof Error) return arg; // pino's own err handling; the serializer scrubs it
            return scrubValue(arg);
          });
          if (args[0] instanceof Error && args.length === 1) scrubbed.push(scrubString(args[0].message));
          return method.apply(this, scrubbed as Parameters<typeof method>);
        },
      },
    },
    destination as pino.DestinationStream,
  );
  return scrubbingChildren(root);
}

export interface RootLoggerOptions {
  /** Binary name, bound as `name`. */
  name: string;
  /** The environment variable holding the level. */
  levelEnv: string;
  env: Readonly<Record<string, string | undefined>>;
  destination?: LogDestination;
}

/** The process's root logger; throws StartupError for an unknown level. */
export function createRootLogger(options: RootLoggerOptions): Logger {
  const level = parseLogLevel(options.env[options.levelEnv], options.levelEnv);
  return createLogger({
    level,
    name: options.name,
    ...(options.destination ? { destination: options.destination } : {}),
  });
}

export { formatPrettyLine, prettyDestination } from "./pretty.ts";
export { REDACTED, scrubString, scrubValue, serializeError, isSensitiveKey } from "./redact.ts";
