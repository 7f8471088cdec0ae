// Timers for the node loops, injectable so tests can run a 10 s cadence in milliseconds.
import { sleepUnlessAborted } from "../../../shared/lifecycle/sleep.ts";

export interface LoopClock {
  /** Wall time, stamped into heartbeats and renewTime. */
  now(): Date;
  /** Resolves after `ms`, or early (without throwing) when the signal aborts. */
  sleep(ms: number, signal: AbortSignal): Promise<void>;
}

export const realLoopClock: LoopClock = {
  now: () => new Date(),
  sleep: sleepUnlessAborted,
};

/** The minimal logger the loops need; a pino Logger satisfies it. */
export interface LoopLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
  debug(obj: object, msg: string): void;
}

export const errMessage = (e: unknown): string => (e instanceof Error ? e.message : String(e));
