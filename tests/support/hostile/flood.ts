// The request floods of the hostile client (anonymous junk lookups, upgrade-and-drop loops) as their own process:
// `bun tests/support/hostile/flood.ts '<json>'`. A flood is CPU-bound on the sending side; run in the test's
// process it would slow the second tenant's SDK calls there and blur what the proxy does to them (the attacker is
// another machine in real life). Runs until SIGTERM or `ms`, then prints one JSON line with what it did.
import { z } from "zod";
import { HostileClient } from "./client.ts";

const Args = z.object({
  proxy: z.object({ host: z.string(), port: z.number().int() }),
  domain: z.string(),
  sandboxId: z.string(),
  token: z.string(),
  guestPort: z.number().int(),
  ms: z.number().int().positive(),
  junkConcurrency: z.number().int().nonnegative(),
  upgradeDrops: z.number().int().nonnegative(),
});
export type FloodArgs = z.infer<typeof Args>;

export interface FloodResult {
  junk: { sent: number; statuses: Record<string, number> };
  upgraded: number;
}

export function floodCommand(args: FloodArgs): string[] {
  return [process.execPath, import.meta.path, JSON.stringify(args)];
}

if (import.meta.main) {
  const a = Args.parse(JSON.parse(process.argv[2] ?? "{}"));
  const client = new HostileClient(a);
  let stop = false;
  const end = () => (stop = true);
  process.on("SIGTERM", end);
  const timer = setTimeout(end, a.ms);
  const [junk, upgraded] = await Promise.all([
    a.junkConcurrency > 0 ? client.junkLookups(() => stop, a.junkConcurrency) : { sent: 0, statuses: {} },
    client.upgradeAndDrop(a.upgradeDrops),
  ]);
  clearTimeout(timer);
  client.closeAll();
  const result: FloodResult = { junk, upgraded };
  process.stdout.write(`${JSON.stringify(result)}\n`);
  process.exit(0);
}
