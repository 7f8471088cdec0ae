// Failures of the claims table. Every one is fatal at startup (§5.12): starting without durable claims
// would leak one microVM per claim on the next restart, so the message names the file and says what to fix.

export type ClaimsStateProblem = "unreadable" | "malformed" | "unwritable";

const WORDS: Record<ClaimsStateProblem, string> = {
  unreadable: "not readable",
  malformed: "malformed",
  unwritable: "not writable",
};

export class ClaimsStateError extends Error {
  readonly code: ClaimsStateProblem;
  readonly path: string;

  constructor(code: ClaimsStateProblem, path: string, detail: string, cause?: unknown) {
    super(`claims state is ${WORDS[code]}: ${path}: ${detail}`, cause === undefined ? undefined : { cause });
    this.name = "ClaimsStateError";
    this.code = code;
    this.path = path;
  }
}

export function isClaimsStateError(e: unknown): e is ClaimsStateError {
  return e instanceof ClaimsStateError;
}
