// Fan-outs over the nodes of a fleet (docs/fleet.md): a bounded number of calls in flight, and either the first
// hit (the rest cancelled through the shared signal) or every result. A failing node is a miss, never a throw.

/** Default bound on node calls in flight for one fan-out. */
export const FANOUT_CONCURRENCY = 16;

/**
 * The first non-undefined result of `fn` over `items` (≤ `limit` in flight); once one hits, or `o.signal` aborts,
 * the signal handed to the calls still running aborts and no new call starts. Errors count as misses.
 */
export async function firstHit<T, R>(
  items: readonly T[],
  limit: number,
  fn: (item: T, signal: AbortSignal) => Promise<R | undefined>,
  o: { signal?: AbortSignal } = {},
): Promise<R | undefined> {
  const abort = new AbortController();
  const stop = () => abort.abort();
  o.signal?.addEventListener("abort", stop, { once: true });
  if (o.signal?.aborted) abort.abort();
  let next = 0;
  let found: R | undefined;
  const worker = async () => {
    while (found === undefined && !abort.signal.aborted && next < items.length) {
      const item = items[next++]!;
      try {
        const r = await fn(item, abort.signal);
        if (r !== undefined && found === undefined) {
          found = r;
          abort.abort();
        }
      } catch {
        // a failing node is just not a hit
      }
    }
  };
  try {
    await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  } finally {
    o.signal?.removeEventListener("abort", stop);
  }
  return found;
}

/** Map with at most `limit` in flight; a rejection becomes an Error in its slot (never thrown). */
export async function mapLimit<T, R>(items: readonly T[], limit: number, fn: (item: T) => Promise<R>): Promise<(R | Error)[]> {
  const out: (R | Error)[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      try {
        out[i] = await fn(items[i]!);
      } catch (err) {
        out[i] = err instanceof Error ? err : new Error(String(err));
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}
