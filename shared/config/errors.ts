// The two ways startup can fail, kept apart because operators and supervisors read the exit code:
// a usage error (unknown flag, unparsable or out-of-range value) exits 2, like Go's flag package;
// any other fatal startup problem exits 1 with one clear log line (docs/decisions.md#exit-codes).

/** A command-line or environment value the binary cannot accept. Exit code 2. */
export class UsageError extends Error {
  override readonly name = "UsageError";
  readonly exitCode = 2 as const;
  /** The flag at fault, spelled with its dashes (`--node-memory`), when there is one. */
  readonly flag: string | undefined;
  /** The value that was rejected, verbatim. */
  readonly value: string | undefined;

  constructor(message: string, context: { flag?: string; value?: string; cause?: unknown } = {}) {
    super(message, context.cause === undefined ? undefined : { cause: context.cause });
    this.flag = context.flag;
    this.value = context.value;
  }
}

/**
 * A fatal problem found while starting (a flag combination that cannot serve, an unreadable file,
 * an unknown log level). Exit code 1; the message must name the flag or file.
 */
export class StartupError extends Error {
  override readonly name = "StartupError";
  readonly exitCode = 1 as const;
  readonly context: Record<string, unknown>;

  constructor(message: string, context: Record<string, unknown> = {}, cause?: unknown) {
    super(message, cause === undefined ? undefined : { cause });
    this.context = context;
  }
}

export function isUsageError(err: unknown): err is UsageError {
  return err instanceof UsageError;
}

export function isStartupError(err: unknown): err is StartupError {
  return err instanceof StartupError;
}
