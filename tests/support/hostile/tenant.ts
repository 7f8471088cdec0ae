// The second tenant: an honest user of the real e2b SDK (2.51) in another namespace, whose service the attack must
// not take away. It keeps one sandbox and, in a loop, reads its info through the REST surface and writes and reads
// a file through the envd proxy; every few rounds it creates a fresh sandbox and uses it at once (create-then-use,
// the path a starved probe budget breaks), then kills it. Every call is timed; failures are kept with their text.
import { Sandbox, type SandboxOpts } from "e2b";

export type TenantOpts = SandboxOpts & { apiUrl: string; sandboxUrl?: string };

export interface TenantRun {
  /** Milliseconds of each steady call (getInfo, files.write, files.read) that succeeded. */
  latencies: number[];
  /** create + files.write + kill of a fresh sandbox, ms, for those that succeeded. */
  fresh: number[];
  calls: number;
  failures: string[];
}

export interface Tenant {
  /** Runs the loop for `ms` (ending the round in flight) and returns what it measured. */
  run(ms: number): Promise<TenantRun>;
  stop(): Promise<void>;
}

const FRESH_EVERY = 4;

export async function startTenant(opts: TenantOpts, template: string): Promise<Tenant> {
  const sbx = await Sandbox.create(template, opts);
  await sbx.files.write("/tenant/warm.txt", "warm");
  return {
    async run(ms) {
      const out: TenantRun = { latencies: [], fresh: [], calls: 0, failures: [] };
      const end = performance.now() + ms;
      const timed = async (what: string, f: () => Promise<unknown>, into: number[]) => {
        const t0 = performance.now();
        out.calls++;
        try {
          await f();
          into.push(performance.now() - t0);
        } catch (e) {
          out.failures.push(`${what} after ${Math.round(performance.now() - t0)} ms: ${(e as Error).message}`);
        }
      };
      for (let round = 0; performance.now() < end; round++) {
        await timed("getInfo", () => sbx.getInfo(), out.latencies);
        await timed("files.write", () => sbx.files.write(`/tenant/r${round % 8}.txt`, `round ${round}`), out.latencies);
        await timed("files.read", async () => {
          const got = await sbx.files.read(`/tenant/r${round % 8}.txt`);
          if (got !== `round ${round}`) throw new Error(`read back ${JSON.stringify(got)}`);
        }, out.latencies);
        if (round % FRESH_EVERY === 0) {
          await timed("fresh create-then-use", async () => {
            const f = await Sandbox.create(template, opts);
            try {
              await f.files.write("/fresh.txt", "x");
            } finally {
              await f.kill().catch(() => undefined);
            }
          }, out.fresh);
        }
      }
      return out;
    },
    stop: async () => void (await sbx.kill().catch(() => undefined)),
  };
}
