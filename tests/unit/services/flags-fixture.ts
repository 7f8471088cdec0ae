// The readings every service's flags test makes of its own parse and startup check: the configuration a run
// gets, the message of the UsageError a bad argv raises (exit 2), and that of the StartupError the check raises
// (exit 1). Each asserts the error's class before returning its message.
import { expect } from "bun:test";
import { StartupError, UsageError, type CliOutcome, type Env } from "#shared/config/index.ts";

export function flagReaders<C>(parse: (argv: readonly string[], env: Env) => CliOutcome<C>, check?: (config: C) => void) {
  function config(argv: string[] = [], env: Record<string, string> = {}): C {
    const outcome = parse(argv, env);
    if (outcome.kind !== "run") throw new Error(`expected run, got ${outcome.kind}`);
    return outcome.config;
  }

  function usageMessage(argv: string[], env: Record<string, string> = {}): string {
    try {
      parse(argv, env);
    } catch (err) {
      expect(err).toBeInstanceOf(UsageError);
      return (err as Error).message;
    }
    throw new Error("expected a UsageError");
  }

  function startupMessage(argv: string[]): string {
    if (!check) throw new Error("flagReaders: no startup check given");
    try {
      check(config(argv));
    } catch (err) {
      expect(err).toBeInstanceOf(StartupError);
      return (err as Error).message;
    }
    throw new Error("expected a StartupError");
  }

  return { config, usageMessage, startupMessage };
}
