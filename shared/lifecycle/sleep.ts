// The one abortable sleep every loop and retry uses: it resolves after `ms`, or at once (never throwing) when
// the signal aborts, and leaves no timer or listener behind either way. Callers that must stop on abort check
// the signal afterwards (`signal.throwIfAborted()`).
export function sleepUnlessAborted(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise<void>((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, Math.max(0, ms));
    signal?.addEventListener("abort", done, { once: true });
  });
}
