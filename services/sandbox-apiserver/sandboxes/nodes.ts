// One sandboxd client per node address, all presenting the fleet token (an empty token sends no Authorization
// header, docs/api.md "Token"). Clients are cheap and stateless apart from their base URL, but keeping one per
// address lets Bun's fetch reuse keep-alive connections to each node.
import type { Logger } from "pino";
import { SandboxdClient } from "#shared/sandboxd/index.ts";

/** Total budget of one node call (connect, headers, body). */
export const NODE_CALL_TIMEOUT_MS = 10_000;
/** Budget of one live lookup: a node that does not answer in time is a miss, never an error. */
export const LIVE_LOOKUP_TIMEOUT_MS = 500;

export class NodeClients {
  private readonly clients = new Map<string, SandboxdClient>();

  constructor(
    readonly token: string,
    private readonly log?: Logger,
    private readonly fetchImpl?: typeof fetch,
  ) {}

  for(address: string): SandboxdClient {
    let c = this.clients.get(address);
    if (!c) {
      c = new SandboxdClient({
        baseUrl: SandboxdClient.baseUrlFor(address),
        token: this.token,
        timeoutMs: NODE_CALL_TIMEOUT_MS,
        ...(this.log ? { log: this.log } : {}),
        ...(this.fetchImpl ? { fetch: this.fetchImpl } : {}),
      });
      this.clients.set(address, c);
    }
    return c;
  }
}

/** Runs `fn` over `items` at most `limit` at a time (the fan-out bound over nodes is 16). */
export async function mapBounded<T, R>(items: readonly T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}

/**
 * The first non-undefined result of `fn` over `items` (≤ `limit` concurrent); once one hits, the shared signal
 * aborts the calls still running. Errors count as misses.
 */
export async function firstHit<T, R>(items: readonly T[], limit: number, fn: (item: T, signal: AbortSignal) => Promise<R | undefined>): Promise<R | undefined> {
  const ac = new AbortController();
  let hit: R | undefined;
  let next = 0;
  const worker = async () => {
    while (hit === undefined && next < items.length) {
      const item = items[next++]!;
      try {
        const r = await fn(item, ac.signal);
        if (r !== undefined && hit === undefined) {
          hit = r;
          ac.abort(new Error("another node answered first"));
        }
      } catch {
        // a failed node is a miss
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return hit;
}
