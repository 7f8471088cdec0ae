// The cost of the namespaced guest against the process sandbox (issue 18's "measure and report"): not a test and
// not part of any suite. Run by hand: `bun tests/integration/sandboxd-sim/guest/measure-cost.ts [rounds]`.
// Per mode: claim -> first command p50/p90 (POST /v1/claim, envd /init and `commands.run("true")` with the stock
// e2b SDK through the ports relay), the guest's start time (claim reply -> guest ready), and the idle memory a
// sandbox adds (RSS and PSS of the processes it owns, plus the simulator's own RSS growth).
import { readFileSync } from "node:fs";
import { Sandbox } from "e2b";
import { startSandboxdSim } from "#services/sandboxd-sim/sim.ts";
import { startRelayFront, type FrontRoute } from "./relay-front.ts";

const ROUNDS = Number(process.argv[2] ?? 15);
const IDLE_SANDBOXES = 5;
const ROOT = "measure-root";

const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]!;
const kib = (pid: number, file: string, field: string) => {
  try {
    const m = readFileSync(`/proc/${pid}/${file}`, "utf8").match(new RegExp(`^${field}:\\s+(\\d+) kB`, "m"));
    return m ? Number(m[1]) : 0;
  } catch {
    return 0;
  }
};

async function measure(isolation: "auto" | "process"): Promise<void> {
  const sim = await startSandboxdSim({ rootToken: ROOT, pools: ["base/none/small=0"], guestAgents: { isolation } });
  const routes = new Map<string, FrontRoute>();
  const front = await startRelayFront(sim.url, ROOT, (id) => routes.get(id));
  const host = sim.node.guestHost!;
  const claim = async () => {
    const r = await fetch(`${sim.url}/v1/claim`, { method: "POST", headers: { authorization: `Bearer ${ROOT}` }, body: JSON.stringify({ template: "base" }) });
    return (await r.json()) as { id: string; token: string };
  };
  const sdk = async (c: { id: string; token: string }, tok: string) => {
    const publicId = c.id.replace("_", "-");
    routes.set(publicId, { claimId: c.id, claimToken: c.token });
    await fetch(`${front.url}/init`, { method: "POST", headers: { "e2b-sandbox-id": publicId, "e2b-sandbox-port": "49983" }, body: JSON.stringify({ accessToken: tok }) });
    const Ctor = Sandbox as unknown as new (o: Record<string, unknown>) => Sandbox;
    return new Ctor({ sandboxId: publicId, envdAccessToken: tok, envdVersion: "0.8.0", sandboxUrl: front.url, domain: "sim.test", apiKey: "unused" });
  };
  const release = (id: string) => fetch(`${sim.url}/v1/sandboxes/${id}/release`, { method: "POST", headers: { authorization: `Bearer ${ROOT}` } });

  const firstCommand: number[] = [];
  const start: number[] = [];
  for (let i = 0; i < ROUNDS + 1; i++) {
    const t0 = performance.now();
    const c = await claim();
    const t1 = performance.now();
    await host.get(c.id)!.ready;
    const t2 = performance.now();
    const sb = await sdk(c, `tok-${i}`);
    await sb.commands.run("true");
    const t3 = performance.now();
    if (i > 0) {
      // round 0 warms the SDK and the JIT
      firstCommand.push(t3 - t0);
      start.push(t2 - t1);
    }
    await release(c.id);
  }

  Bun.gc(true);
  await Bun.sleep(500);
  const rss0 = kib(process.pid, "status", "VmRSS");
  const ids: string[] = [];
  for (let i = 0; i < IDLE_SANDBOXES; i++) {
    const c = await claim();
    await (await sdk(c, `idle-${i}`)).commands.run("true");
    ids.push(c.id);
  }
  await Bun.sleep(1500);
  Bun.gc(true);
  const rss1 = kib(process.pid, "status", "VmRSS");
  let ownRss = 0;
  let ownPss = 0;
  for (const id of ids) {
    for (const p of host.get(id)!.ns?.pids() ?? []) {
      ownRss += kib(p, "status", "VmRSS");
      ownPss += kib(p, "smaps_rollup", "Pss");
    }
  }
  // A sandbox that serves a port also runs its ports relay (started on the first relayed connection).
  let relayRss = 0;
  let relayPss = 0;
  if (host.isolation.mode === "namespaces") {
    for (const id of ids) await fetch(`${front.url}/`, { headers: { "e2b-sandbox-id": id.replace("_", "-"), "e2b-sandbox-port": "3000" } });
    await Bun.sleep(1000);
    for (const id of ids) {
      for (const p of host.get(id)!.ns!.pids()) {
        relayRss += kib(p, "status", "VmRSS");
        relayPss += kib(p, "smaps_rollup", "Pss");
      }
    }
    relayRss -= ownRss;
    relayPss -= ownPss;
  }
  for (const id of ids) await release(id);
  const ms = (x: number) => `${x.toFixed(0)} ms`;
  console.log(
    `${host.isolation.mode.padEnd(10)} claim->first command p50 ${ms(pct(firstCommand, 50))} p90 ${ms(pct(firstCommand, 90))}; ` +
      `guest start p50 ${ms(pct(start, 50))} p90 ${ms(pct(start, 90))} (${ROUNDS} rounds); ` +
      `idle per sandbox: own processes RSS ${(ownRss / IDLE_SANDBOXES / 1024).toFixed(1)} MiB, PSS ${(ownPss / IDLE_SANDBOXES / 1024).toFixed(1)} MiB, ` +
      `simulator RSS +${((rss1 - rss0) / IDLE_SANDBOXES / 1024).toFixed(1)} MiB; ` +
      `the ports relay once a port is used: RSS +${(relayRss / IDLE_SANDBOXES / 1024).toFixed(1)} MiB, PSS +${(relayPss / IDLE_SANDBOXES / 1024).toFixed(1)} MiB`,
  );
  await front.stop();
  await sim.stop();
}

await measure("process");
await measure("auto");
