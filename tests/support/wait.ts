// The one bounded wait the tests use where time cannot be injected (a real kube-apiserver, a spawned daemon, real
// sockets). With a FakeClock (shared/clock) a test moves time itself and needs none of this.

/**
 * Thrown by a waitFor check to stop waiting at once, when waiting longer cannot help (the process it waits on has
 * exited); waitFor rethrows it unchanged instead of retrying.
 */
export class GiveUp extends Error {
  override name = "GiveUp";
}

/**
 * Polls `fn` every `everyMs` until it returns a truthy value, and returns that. After `timeoutMs` it throws, naming
 * `what` and the last error `fn` threw (a throwing `fn` is retried like a falsy one, except GiveUp).
 */
export async function waitFor<T>(
  what: string,
  fn: () => T | undefined | null | false | Promise<T | undefined | null | false>,
  timeoutMs = 30_000,
  everyMs = 100,
): Promise<T> {
  const end = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (e) {
      if (e instanceof GiveUp) throw e;
      last = e;
    }
    if (Date.now() > end) throw new Error(`timed out waiting for ${what} (${timeoutMs} ms)${last ? `: ${String(last)}` : ""}`);
    await Bun.sleep(everyMs);
  }
}

/** waitFor for a plain condition, polled often: in-process fakes answer within a few event-loop turns. */
export async function until(cond: () => boolean | Promise<boolean>, what = "condition", timeoutMs = 3_000, everyMs = 2): Promise<void> {
  await waitFor(what, cond, timeoutMs, everyMs);
}
