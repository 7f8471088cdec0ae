// The second tenant: an honest user of the real e2b SDK (2.51) in another namespace, whose service the attack must
// not take away. It keeps one sandbox and, in a loop, reads its info through the REST surface and writes and reads
// a file through the envd proxy; every few rounds it creates a fresh sandbox and uses it at once (create-then-use,
// the path a starved probe budget breaks), then kills it. Every call is timed; failures are kept with their text.
// It runs as its own process (`bun tests/support/hostile/tenant.ts '<json>'`, one JSON command a line on stdin,
// one JSON answer a line on stdout): in the test's process its timings would include the event-loop delay of the
// attack's own code there (the hostile guest, the simulated node, the stalled clients), not what the proxy does to
// it; a tenant is another machine in real life (docs/hostile-tenants.md "The second tenant's own process").
import { Sandbox, type SandboxOpts } from "e2b";
import { z } from "zod";

export type TenantOpts = SandboxOpts & { apiUrl: string; sandboxUrl?: string };

export interface TenantRun {
  /** Milliseconds of each steady call (getInfo, files.write, files.read) that succeeded. */
  latencies: number[];
  /** The same, per call (getInfo goes to the REST surface only, files.* through the proxy and the node). */
  byCall: Record<string, number[]>;
  /**
   * One bare request a round to a Bun server in the test's process that does nothing (the floor): what the
   * attack's own code there (hostile guest, simulated node, attack clients) adds to any request served there, which
   * the tenant's files.* calls are (their node and guest run there), ms.
   */
  floor: number[];
  /** create + files.write + kill of a fresh sandbox, ms, for those that succeeded. */
  fresh: number[];
  calls: number;
  failures: string[];
  /** The tenant process's own event-loop delay during the run (10 ms timer drift), p99 and max, ms. */
  loopLagP99: number;
  loopLagMax: number;
}

export interface Tenant {
  /** Runs the loop for `ms` (ending the round in flight) and returns what it measured. */
  run(ms: number): Promise<TenantRun>;
  stop(): Promise<void>;
}

const FRESH_EVERY = 4;

/** The tenant's loop in this process (what the tenant process runs). */
async function localTenant(opts: TenantOpts, template: string, floorUrl: string): Promise<Tenant> {
  const sbx = await Sandbox.create(template, opts);
  await sbx.files.write("/tenant/warm.txt", "warm");
  return {
    async run(ms) {
      const out: TenantRun = { latencies: [], byCall: {}, floor: [], fresh: [], calls: 0, failures: [], loopLagP99: 0, loopLagMax: 0 };
      const lag = loopLag();
      const end = performance.now() + ms;
      const timed = async (what: string, f: () => Promise<unknown>, into: number[]) => {
        const t0 = performance.now();
        out.calls++;
        try {
          await f();
          const took = performance.now() - t0;
          into.push(took);
          if (into === out.latencies) (out.byCall[what] ??= []).push(took);
        } catch (e) {
          out.failures.push(`${what} after ${Math.round(performance.now() - t0)} ms: ${(e as Error).message}`);
        }
      };
      for (let round = 0; performance.now() < end; round++) {
        const f0 = performance.now();
        await fetch(floorUrl).then((r) => r.arrayBuffer()).then(() => out.floor.push(performance.now() - f0), () => undefined);
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
      [out.loopLagP99, out.loopLagMax] = lag.stop();
      return out;
    },
    stop: async () => void (await sbx.kill().catch(() => undefined)),
  };
}

/** Event-loop delay of this process: how late a 10 ms timer fires. stop() gives [p99, max] in ms. */
export function loopLag(everyMs = 10): { stop(): [number, number] } {
  const lags: number[] = [];
  let last = performance.now();
  const t = setInterval(() => {
    const now = performance.now();
    lags.push(Math.max(0, now - last - everyMs));
    last = now;
  }, everyMs);
  return {
    stop() {
      clearInterval(t);
      lags.sort((a, b) => a - b);
      return [lags[Math.min(lags.length - 1, Math.floor(lags.length * 0.99))] ?? 0, lags.at(-1) ?? 0];
    },
  };
}

const Command = z.discriminatedUnion("op", [z.object({ op: z.literal("run"), ms: z.number().int().positive() }), z.object({ op: z.literal("stop") })]);
const Answer = z.union([z.object({ ready: z.literal(true) }), z.object({ run: z.custom<TenantRun>((v) => typeof v === "object" && v !== null) }), z.object({ stopped: z.literal(true) }), z.object({ error: z.string() })]);

/** The tenant as its own process; the returned Tenant talks to it over stdin/stdout. */
export async function startTenant(opts: TenantOpts, template: string): Promise<Tenant> {
  // The floor: a server in this (the test's) process that does nothing, timed by the tenant each round.
  const floor = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response(null, { status: 204 }) });
  const floorUrl = `http://127.0.0.1:${floor.port}/`;
  const proc = Bun.spawn([process.execPath, import.meta.path, JSON.stringify({ opts, template, floorUrl })], { stdin: "pipe", stdout: "pipe", stderr: "inherit" });
  const lines = (async function* () {
    let buf = "";
    for await (const chunk of proc.stdout as ReadableStream<Uint8Array>) {
      buf += Buffer.from(chunk).toString("utf8");
      for (let nl = buf.indexOf("\n"); nl >= 0; nl = buf.indexOf("\n")) {
        yield buf.slice(0, nl);
        buf = buf.slice(nl + 1);
      }
    }
  })();
  const next = async () => {
    const { value, done } = await lines.next();
    if (done) throw new Error(`the tenant process ended (exit ${await proc.exited})`);
    const a = Answer.parse(JSON.parse(value));
    if ("error" in a) throw new Error(`the tenant process failed: ${a.error}`);
    return a;
  };
  const send = (c: z.infer<typeof Command>) => {
    proc.stdin.write(`${JSON.stringify(c)}\n`);
    proc.stdin.flush();
  };
  await next(); // ready: its sandbox is created and used once
  return {
    async run(ms) {
      send({ op: "run", ms });
      const a = await next();
      if (!("run" in a)) throw new Error(`the tenant process answered ${JSON.stringify(a)} to run`);
      return a.run;
    },
    async stop() {
      void floor.stop(true);
      if (proc.exitCode !== null) return;
      send({ op: "stop" });
      await Promise.race([next().catch(() => undefined), Bun.sleep(10_000)]);
      proc.kill();
      await proc.exited;
    },
  };
}

if (import.meta.main) {
  const Args = z.object({ opts: z.custom<TenantOpts>((v) => typeof v === "object" && v !== null), template: z.string(), floorUrl: z.string().url() });
  const say = (a: z.infer<typeof Answer>) => process.stdout.write(`${JSON.stringify(a)}\n`);
  try {
    const a = Args.parse(JSON.parse(process.argv[2] ?? "{}"));
    const tenant = await localTenant(a.opts, a.template, a.floorUrl);
    say({ ready: true });
    let buf = "";
    for await (const chunk of Bun.stdin.stream()) {
      buf += Buffer.from(chunk).toString("utf8");
      for (let nl = buf.indexOf("\n"); nl >= 0; nl = buf.indexOf("\n")) {
        const c = Command.parse(JSON.parse(buf.slice(0, nl)));
        buf = buf.slice(nl + 1);
        if (c.op === "run") say({ run: await tenant.run(c.ms) });
        else {
          await tenant.stop();
          say({ stopped: true });
          process.exit(0);
        }
      }
    }
  } catch (e) {
    say({ error: (e as Error).message });
    process.exit(1);
  }
}
