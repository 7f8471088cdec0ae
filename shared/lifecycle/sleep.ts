// The real clock's abortable sleep under its older name, for code that does not take a Clock (shared/fleet's mesh
// poll). New code takes `clock?: Clock` (shared/clock) and calls `clock.sleep`; there is one implementation.
import { realClock } from "../clock/index.ts";

export const sleepUnlessAborted = (ms: number, signal?: AbortSignal): Promise<void> => realClock.sleep(ms, signal);
