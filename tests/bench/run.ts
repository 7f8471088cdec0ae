// `bun run bench`: runs every benchmark of the system in one go and writes the run to
// tests/bench/results/<UTC time>.json and .md; tests/bench/RESULTS.md is rewritten as the newest table plus the
// history of every earlier run (the files stay, so the history shows each change). Every figure carries the command
// that made it, the machine's core count, the load average while its group ran, and a baseline measured in the same
// run. The vk-sandbox groups share one real kube-apiserver (with an audit log) and one sandboxd simulator; the daemon
// runs as its own process (dist/vk-sandbox when it is newer than its sources, else from source).
//
//   bun run bench                  everything (about 10 min on 2 cores)
//   bun run bench -- claims        only the groups whose name contains "claims" (groups: claims, idle, latency,
//                                  deletes, throughput, rss, e2b, e2b-ab, relay-cpu, stack, apiserver, ramp, sleep, inventory, fleet); the run file then holds those groups'
//                                  figures and, marked with the run they came from, the other groups' figures of the
//                                  newest earlier run
import { mkdirSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { startE2eCluster } from "../e2e/vk-sandbox/cluster.ts";
import { daemonCommand } from "../e2e/vk-sandbox/daemon.ts";
import { startStack } from "../e2e/vk-sandbox/stack.ts";
import { claimsFigures } from "./claims-table.bench.ts";
import { e2bBeforeAfterFigures } from "./e2b-ab.bench.ts";
import { e2bRelayFigures } from "./e2b-relay.bench.ts";
import { relayCpuFigures } from "./relay-cpu.bench.ts";
import { apiserverFigures } from "./sandbox-apiserver.bench.ts";
import { deleteFigures } from "./vk-sandbox-deletes.bench.ts";
import { ensureBuilt, rssFigures } from "./idle-rss.bench.ts";
import { stackFigures } from "./stack.bench.ts";
import { rampFigures } from "./warmpool-ramp.bench.ts";
import { sleepFigures } from "./sleep.bench.ts";
import { inventoryFigures } from "./inventory.bench.ts";
import { fleetFigures } from "./fleet.bench.ts";
import { idleFigures } from "./vk-sandbox-idle.bench.ts";
import { latencyFigures, throughputFigures, type Figure } from "./vk-sandbox-pods.bench.ts";
import { RESULTS_DIR, latestRun, writeRun, type BenchRun, type RunFigure } from "./results.ts";

const only = process.argv.slice(2).filter((a) => !a.startsWith("-"));
const wanted = (group: string) => only.length === 0 || only.some((o) => group.includes(o));
const figures: RunFigure[] = [];
const errors: Array<{ group: string; message: string }> = [];
const started = new Date();
const uptime = () => Bun.spawnSync(["uptime"]).stdout.toString().trim();
const load1 = () => Math.round(loadavg()[0]! * 100) / 100;

/** Runs one group, stamping each figure with the group, its wall time and the 1-minute load before and after. */
async function group(name: string, run: () => Promise<Figure[]>): Promise<void> {
  if (!wanted(name)) return;
  const before = load1();
  const t0 = performance.now();
  console.error(`bench: ${name} … (load ${before})`);
  let out: Figure[];
  try {
    out = await run();
  } catch (e) {
    // One broken group must not cost the others' figures: the run records the failure and goes on.
    const message = e instanceof Error ? (e.stack ?? e.message) : String(e);
    console.error(`bench: ${name} FAILED: ${message}`);
    errors.push({ group: name, message: message.split("\n").slice(0, 6).join("\n") });
    return;
  }
  const seconds = Math.round((performance.now() - t0) / 100) / 10;
  const after = load1();
  console.error(`bench: ${name} done in ${seconds} s (load ${after})`);
  for (const f of out) figures.push({ ...f, group: name, load: { before, after }, groupSeconds: seconds });
}

const uptimeBefore = uptime();
// The vk-sandbox groups run the compiled daemon (daemonCommand picks dist/vk-sandbox when it is current).
if (["idle", "latency", "deletes", "throughput", "rss"].some(wanted)) ensureBuilt();
await group("claims", claimsFigures);

if (["idle", "latency", "deletes", "throughput"].some(wanted)) {
  const e2e = await startE2eCluster();
  // 2 × 12,000 throughput pods + the latency and idle pods, and a margin: the simulator refills slower than that.
  const stack = await startStack(e2e, { pools: ["base=30000"] });
  try {
    // Quietest first: the idle figure must not see another bench's leftovers being processed.
    await group("idle", () => idleFigures(e2e, stack));
    await group("latency", () => latencyFigures(e2e, stack));
    await group("deletes", () => deleteFigures(e2e, stack));
    await group("throughput", () => throughputFigures(e2e, stack));
  } finally {
    await stack.stop();
    await e2e.stop();
  }
}

await group("rss", rssFigures);
await group("e2b", e2bRelayFigures);
// Only with a before tree at hand (E2B_BENCH_BEFORE, default /work/wt/before): skipped with a line otherwise.
await group("e2b-ab", e2bBeforeAfterFigures);
await group("relay-cpu", relayCpuFigures);
await group("stack", stackFigures);
await group("apiserver", apiserverFigures);
await group("ramp", rampFigures);
await group("sleep", sleepFigures);
await group("inventory", inventoryFigures);
// 200 simulated nodes × 2,000 sandboxes by default (FLEET_NODES, FLEET_SANDBOXES): the longest group by far.
await group("fleet", fleetFigures);

// A filtered run carries the other groups forward from the newest earlier run, each marked with where it came from.
if (only.length > 0) {
  const previous = latestRun();
  if (previous) {
    const kept = previous.run.figures.filter((f) => !wanted(f.group)).map((f) => ({ ...f, from: f.from ?? previous.file }));
    figures.unshift(...kept);
  }
}

const rev = Bun.spawnSync(["git", "rev-parse", "--short=12", "HEAD"], { cwd: import.meta.dir }).stdout.toString().trim();
const run: BenchRun = {
  startedAt: started.toISOString(),
  finishedAt: new Date().toISOString(),
  command: `bun run bench${only.length ? ` -- ${only.join(" ")}` : ""}`,
  groups: only.length ? only : "all",
  revision: rev || "unknown",
  cores: cpus().length,
  cpu: cpus()[0]?.model,
  bun: Bun.version,
  daemon: daemonCommand().join(" "),
  uptime: { before: uptimeBefore, after: uptime() },
  figures,
  ...(errors.length ? { errors } : {}),
};
mkdirSync(RESULTS_DIR, { recursive: true });
const { md, file } = writeRun(run);
console.log(md);
console.error(`bench: wrote ${file} and RESULTS.md in ${Math.round((Date.now() - started.getTime()) / 1000)} s`);
if (errors.length) {
  console.error(`bench: ${errors.length} group(s) failed: ${errors.map((e) => e.group).join(", ")}`);
  process.exit(1);
}
