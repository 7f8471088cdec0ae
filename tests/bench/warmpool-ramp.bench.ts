// Warm-pool ramp (issue 21.1 figures): claims/s steps 0 → level → 0 against the simulator's pool model
// (services/sandboxd-sim/pools.ts: a 2 s refill loop, refillConcurrency 8 per node, every provision taking
// --refill-ms) on a fake clock, with the driver's own arithmetic — the DemandMeter fed by NodeInventory-like
// snapshots published every --publish-ms per node, the Autoscaler, the even spread — and the aggregated create's
// placement (warm-weighted over the last published counts, next node when a node has none). Baselines measured in
// the same run: a static pool (spec.replicas as an operator typed it) and a static pool sized for the peak.
//
//   bun tests/bench/warmpool-ramp.bench.ts [--write]     prints the figures as JSON; --write also stores
//                                                         tests/bench/results/warmpool-ramp-<UTC time>.json and .md
//   bun run bench -- ramp                                 the same run as group "ramp" of tests/bench/run.ts
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { join } from "node:path";
import { FakeClock } from "#shared/clock/index.ts";
import { DemandMeter, type FleetNode, RATE_LONG_WINDOW_MS } from "#shared/fleet/index.ts";
import type { PoolKey } from "#shared/sandboxd/index.ts";
import { Pools } from "#services/sandboxd-sim/pools.ts";
import { createIdSource } from "#services/sandboxd-sim/ids.ts";
import { AUTOSCALE_DEFAULTS, ANN_AUTOSCALE_ENABLED, ANN_AUTOSCALE_MAX, ANN_AUTOSCALE_MIN, Autoscaler, demandTarget } from "#services/sandbox-apiserver/warmpool/autoscale.ts";
import { type Resolution, type WarmPool, poolSets } from "#services/sandbox-apiserver/warmpool/plan.ts";
import type { Figure } from "./vk-sandbox-pods.bench.ts";

const KEY: PoolKey = { template: "ghcr.io/bench/agent:1", net: "none", size: "small" };

export interface RampOptions {
  nodes: number;
  refillMs: number;
  publishMs: number;
  /** Driver resync (--warm-pool-sync-interval); passes also follow every publish. */
  syncMs: number;
  level: number;
  idleBeforeMs: number;
  loadMs: number;
  idleAfterMs: number;
  /** How long a claimed sandbox lives before it is released. */
  holdMs: number;
  seed: number;
}

export const DEFAULT_RAMP: RampOptions = {
  nodes: 3,
  refillMs: 8_000,
  publishMs: 5_000,
  syncMs: 5_000,
  level: 2,
  idleBeforeMs: 60_000,
  loadMs: 300_000,
  idleAfterMs: 600_000,
  holdMs: 60_000,
  seed: 21,
};

type Mode = { kind: "autoscaled"; min: number; max: number } | { kind: "static"; replicas: number };

export interface RampCase {
  mode: string;
  claims: number;
  servedWarm: number;
  warmShare: number;
  /** Claims after the meter held its first refill sample, and the share of those served warm. */
  claimsAfterFirstRefill: number;
  warmShareAfterFirstRefill: number;
  /** Share served warm of the claims arriving at least one (two) refill time(s) after the load step. */
  warmShareOneRefillAfterStep: number;
  warmShareTwoRefillsAfterStep: number;
  /** Seconds from the load step to the first target above the minimum (autoscaled only). */
  secondsToScaleUp?: number;
  /** Seconds from the load step to the first target at least the demand the level asks for. */
  secondsToFullTarget?: number;
  peakTarget: number;
  /** Seconds from the load stopping to the targets back at the minimum. */
  secondsBackToMin?: number;
  finalTarget: number;
  /** Σ warm VMs over time across the fleet (what the pool costs), in VM-seconds. */
  warmVmSeconds: number;
  /** Per 30 s from the start: claims, misses, the target at the end, the fleet's warm count at the end. */
  timeline: [number, number, number, number][];
  /** Seconds after the load step of the misses (the first 100). */
  missAt: number[];
  /** Seconds after the load step when the meter held its first refill sample. */
  firstRefillSeconds?: number;
}

const STEP_MS = 100;

/** mulberry32: a seeded PRNG, so every mode sees the same arrival times. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Poisson arrival times over the load window (ms from start). */
function arrivals(o: RampOptions): number[] {
  const rnd = prng(o.seed);
  const out: number[] = [];
  let t = o.idleBeforeMs;
  for (;;) {
    t += (-Math.log(1 - rnd()) / o.level) * 1000;
    if (t >= o.idleBeforeMs + o.loadMs) return out;
    out.push(t);
  }
}

export function runRamp(o: RampOptions, mode: Mode): RampCase {
  const clock = new FakeClock();
  const t0 = clock.now();
  const ids = createIdSource(o.seed);
  const nodes = Array.from({ length: o.nodes }, (_, i) => ({
    name: `node-${i}`,
    pools: new Pools({ clock, ids, provisionLatencyMs: o.refillMs, refillConcurrency: 8 }),
    claims: [] as { id: string; at: number; until: number }[],
    published: undefined as FleetNode | undefined,
    nextPublish: t0 + Math.round(((i + 1) * o.publishMs) / o.nodes),
  }));
  for (const n of nodes) n.pools.start();
  const meter = new DemandMeter(clock);
  const autoscaler = new Autoscaler(meter, clock, AUTOSCALE_DEFAULTS);
  const annotations: Record<string, string> =
    mode.kind === "autoscaled" ? { [ANN_AUTOSCALE_ENABLED]: "true", [ANN_AUTOSCALE_MIN]: String(mode.min), [ANN_AUTOSCALE_MAX]: String(mode.max) } : {};
  const pool: WarmPool = { metadata: { name: "bench", namespace: "bench", uid: "bench", annotations }, spec: { replicas: mode.kind === "static" ? mode.replicas : 1 } };
  const min = mode.kind === "autoscaled" ? mode.min : mode.replicas;
  let target = min;
  const targets: { at: number; target: number }[] = [];

  const pass = () => {
    const base: Resolution[] = [{ pool, key: KEY, replicas: mode.kind === "static" ? mode.replicas : 1 }];
    const plan = mode.kind === "autoscaled" ? autoscaler.plan(base, nodes.length) : undefined;
    const planned = plan?.resolutions ?? base;
    target = (planned[0] as { replicas: number }).replicas;
    targets.push({ at: clock.now() - t0, target });
    const sets = poolSets(planned, nodes.length);
    nodes.forEach((n, i) => n.pools.replace(sets[i]!));
  };
  const publish = (n: (typeof nodes)[number]) => {
    const now = clock.now();
    n.published = {
      name: n.name,
      address: `${n.name}:7777`,
      publishedAt: now,
      pools: n.pools.status().map((p) => ({ ...p.key, warm: p.warm, target: p.target })),
      templates: [],
      entries: n.claims.map((c) => ({ id: c.id, name: `bench/${c.id}`, namespace: "bench", phase: "Running" as const, template: KEY.template, claimedAt: c.at })),
    };
    meter.observe(nodes.flatMap((x) => (x.published ? [x.published] : [])));
  };

  pass();
  const times = arrivals(o);
  let next = 0;
  let claims = 0;
  let served = 0;
  let afterRefill = 0;
  let servedAfterRefill = 0;
  let warmVmMs = 0;
  const missAt: number[] = [];
  let firstRefillAt: number | undefined;
  const late = [0, 0, 0, 0]; // claims, served: one refill after the step; claims, served: two refills after
  let nextSync = t0 + o.syncMs;
  const end = o.idleBeforeMs + o.loadMs + o.idleAfterMs;
  const rnd = prng(o.seed + 1);
  const timeline: [number, number, number, number][] = [];
  let bucket: [number, number, number, number] = [0, 0, 0, 0];
  for (let t = 0; t < end; t += STEP_MS) {
    if (t > 0 && t % 30_000 === 0) {
      timeline.push(bucket);
      bucket = [0, 0, 0, 0];
    }
    clock.advance(STEP_MS);
    const now = clock.now();
    for (const n of nodes) n.claims = n.claims.filter((c) => c.until > now);
    let published = false;
    for (const n of nodes) {
      if (now < n.nextPublish) continue;
      n.nextPublish += o.publishMs;
      publish(n);
      published = true;
    }
    if (published || now >= nextSync) {
      pass();
      nextSync = now + o.syncMs;
    }
    while (next < times.length && times[next]! <= now - t0) {
      next++;
      claims++;
      const refillSeen = meter.read(KEY).refillSamples > 0;
      if (refillSeen && firstRefillAt === undefined) firstRefillAt = now - t0 - o.idleBeforeMs;
      if (refillSeen) afterRefill++;
      // The aggregated create: candidates by the last published warm count, a warm-weighted pick, then the rest.
      const cands = nodes.filter((n) => (n.published?.pools.find((p) => p.template === KEY.template)?.warm ?? 0) > 0);
      const order = [...cands].sort(() => rnd() - 0.5);
      let vm;
      for (const n of order) {
        vm = n.pools.pop(KEY);
        if (vm) {
          n.claims.push({ id: vm.id, at: now, until: now + o.holdMs });
          meter.recordClaim(KEY, vm.id, n.name);
          n.pools.refill(); // sandboxd kicks its refill loop after a claim
          break;
        }
      }
      bucket[0]++;
      const since = now - t0 - o.idleBeforeMs;
      if (since >= o.refillMs) {
        late[0]!++;
        if (vm) late[1]!++;
      }
      if (since >= 2 * o.refillMs) {
        late[2]!++;
        if (vm) late[3]!++;
      }
      if (!vm) meter.recordMiss(KEY); // the aggregated create's 503 path
      if (vm) {
        served++;
        if (refillSeen) servedAfterRefill++;
      } else {
        bucket[1]++;
        if (missAt.length < 100) missAt.push(Math.round(since / 100) / 10);
      }
    }
    const warmNow = nodes.reduce((s, n) => s + n.pools.warmCount(KEY), 0);
    warmVmMs += warmNow * STEP_MS;
    bucket[2] = target;
    bucket[3] = warmNow;
  }
  timeline.push(bucket);
  for (const n of nodes) n.pools.stop();

  const loadStart = o.idleBeforeMs;
  const loadEnd = o.idleBeforeMs + o.loadMs;
  const full = demandTarget(o.level, o.refillMs, AUTOSCALE_DEFAULTS, o.nodes);
  const up = targets.find((x) => x.at >= loadStart && x.target > min);
  const fullAt = targets.find((x) => x.at >= loadStart && x.target >= Math.min(full, mode.kind === "autoscaled" ? mode.max : full));
  const lastAboveMin = [...targets].reverse().find((x) => x.target > min);
  const backToMin = lastAboveMin ? targets.find((x) => x.at > lastAboveMin.at) : undefined;
  const round = (x: number, d = 4) => Math.round(x * 10 ** d) / 10 ** d;
  return {
    mode: mode.kind === "autoscaled" ? `autoscaled (min ${mode.min}, max ${mode.max})` : `static replicas ${mode.replicas}`,
    claims,
    servedWarm: served,
    warmShare: round(served / Math.max(1, claims)),
    claimsAfterFirstRefill: afterRefill,
    warmShareAfterFirstRefill: round(servedAfterRefill / Math.max(1, afterRefill)),
    warmShareOneRefillAfterStep: round(late[1]! / Math.max(1, late[0]!)),
    warmShareTwoRefillsAfterStep: round(late[3]! / Math.max(1, late[2]!)),
    ...(mode.kind === "autoscaled" && up ? { secondsToScaleUp: round((up.at - loadStart) / 1000, 1) } : {}),
    ...(mode.kind === "autoscaled" && fullAt ? { secondsToFullTarget: round((fullAt.at - loadStart) / 1000, 1) } : {}),
    peakTarget: Math.max(...targets.map((x) => x.target)),
    ...(mode.kind === "autoscaled" && backToMin ? { secondsBackToMin: round((backToMin.at - loadEnd) / 1000, 1) } : {}),
    finalTarget: target,
    warmVmSeconds: Math.round(warmVmMs / 1000),
    timeline,
    missAt,
    ...(firstRefillAt !== undefined ? { firstRefillSeconds: round(firstRefillAt / 1000, 1) } : {}),
  };
}

export interface RampResult {
  command: string;
  cores: number;
  bun: string;
  uptime: string;
  options: RampOptions;
  autoscale: typeof AUTOSCALE_DEFAULTS;
  cases: RampCase[];
  /** Autoscaled warm share ÷ the static pool's, and its warm VM-seconds ÷ the peak-sized static pool's. */
  ratios: { warmShareVsStatic: number; warmVmSecondsVsPeakStatic: number };
}

export function runRampBench(o: RampOptions = DEFAULT_RAMP, command = "bun tests/bench/warmpool-ramp.bench.ts"): RampResult {
  const peak = demandTarget(o.level, o.refillMs, AUTOSCALE_DEFAULTS, o.nodes);
  const auto = runRamp(o, { kind: "autoscaled", min: 1, max: 64 });
  const fixed = runRamp(o, { kind: "static", replicas: 3 });
  const sized = runRamp(o, { kind: "static", replicas: peak });
  const slow = runRamp({ ...o, publishMs: 30_000 }, { kind: "autoscaled", min: 1, max: 64 });
  slow.mode += ", 30 s publishes (vk-sandbox's default)";
  return {
    command,
    cores: cpus().length,
    bun: Bun.version,
    uptime: `${Bun.spawnSync(["uptime"]).stdout.toString().trim()} (load1 ${loadavg()[0]!.toFixed(2)})`,
    options: o,
    autoscale: AUTOSCALE_DEFAULTS,
    cases: [auto, fixed, sized, slow],
    ratios: {
      warmShareVsStatic: Math.round((auto.warmShare / Math.max(1e-9, fixed.warmShare)) * 100) / 100,
      warmVmSecondsVsPeakStatic: Math.round((auto.warmVmSeconds / Math.max(1, sized.warmVmSeconds)) * 100) / 100,
    },
  };
}

/** The figures for `bun run bench -- ramp` (tests/bench/run.ts), each against a baseline of the same run. */
export async function rampFigures(): Promise<Figure[]> {
  const command = "bun run bench -- ramp";
  const r = runRampBench(DEFAULT_RAMP, command);
  const [auto, fixed, sized] = r.cases as [RampCase, RampCase, RampCase];
  const notes = `3 nodes, refill 8 s, publish 5 s, claims/s 0 → 2 → 0 (fake clock; ${r.uptime})`;
  return [
    { name: "warm-pool ramp: share of claims served warm, autoscaled", value: auto.warmShare, unit: "ratio", command, cores: r.cores, baseline: { name: "static spec.replicas 3", value: fixed.warmShare, unit: "ratio" }, notes },
    { name: "warm-pool ramp: share served warm from two refill times after the step, autoscaled", value: auto.warmShareTwoRefillsAfterStep, unit: "ratio", command, cores: r.cores, baseline: { name: `static sized for the peak (${sized.peakTarget})`, value: sized.warmShareTwoRefillsAfterStep, unit: "ratio" }, notes },
    { name: "warm-pool ramp: warm VM-seconds held, autoscaled", value: auto.warmVmSeconds, unit: "VM-s", command, cores: r.cores, baseline: { name: `static sized for the peak (${sized.peakTarget})`, value: sized.warmVmSeconds, unit: "VM-s" }, notes },
    { name: "warm-pool ramp: seconds from load stop to the minimum target", value: auto.secondsBackToMin ?? NaN, unit: "s", command, cores: r.cores, baseline: { name: "rate window + scale-down window", value: (RATE_LONG_WINDOW_MS + AUTOSCALE_DEFAULTS.downWindowMs) / 1000, unit: "s" }, notes },
  ];
}

function markdown(r: RampResult): string {
  const rows = r.cases.map(
    (c) =>
      `| ${c.mode} | ${c.claims} | ${(c.warmShare * 100).toFixed(1)} % | ${(c.warmShareAfterFirstRefill * 100).toFixed(1)} % (${c.claimsAfterFirstRefill}) | ` +
      `${(c.warmShareOneRefillAfterStep * 100).toFixed(1)} % / ${(c.warmShareTwoRefillsAfterStep * 100).toFixed(1)} % | ` +
      `${c.secondsToScaleUp ?? "-"} | ${c.secondsToFullTarget ?? "-"} | ${c.peakTarget} | ${c.secondsBackToMin ?? "-"} | ${c.finalTarget} | ${c.warmVmSeconds} |`,
  );
  const o = r.options;
  return [
    "# Warm-pool ramp",
    "",
    `Command: \`${r.command}\` · ${r.cores} cores · bun ${r.bun} · ${r.uptime}`,
    "",
    `${o.nodes} nodes, refill ${o.refillMs / 1000} s, publish every ${o.publishMs / 1000} s, driver sync ${o.syncMs / 1000} s; ` +
      `claims/s 0 for ${o.idleBeforeMs / 1000} s, ${o.level} for ${o.loadMs / 1000} s (Poisson, seed ${o.seed}), 0 for ${o.idleAfterMs / 1000} s; ` +
      `each sandbox held ${o.holdMs / 1000} s. Autoscaler: safety ${r.autoscale.safety}, z ${r.autoscale.z}, headroom ${r.autoscale.headroom}, ` +
      `scale-down window ${r.autoscale.downWindowMs / 1000} s, default refill ${r.autoscale.defaultRefillMs / 1000} s. Fake clock: the figures do not depend on the machine's load.`,
    "",
    "| mode | claims | served warm | warm after first refill seen (claims) | warm ≥ 1 / 2 refill times after the step | s to scale up | s to full target | peak target | s back to min after load | final target | warm VM-s |",
    "|---|---|---|---|---|---|---|---|---|---|---|",
    ...rows,
    "",
    `Autoscaled warm share ÷ static-3 warm share: **${r.ratios.warmShareVsStatic}**; autoscaled warm VM-seconds ÷ peak-sized static: **${r.ratios.warmVmSecondsVsPeakStatic}**.`,
    "",
  ].join("\n");
}

if (import.meta.main) {
  const write = process.argv.includes("--write");
  const result = runRampBench(DEFAULT_RAMP, `bun tests/bench/warmpool-ramp.bench.ts${write ? " --write" : ""}`);
  console.log(JSON.stringify(result, null, 2));
  if (write) {
    const dir = join(import.meta.dir, "results");
    mkdirSync(dir, { recursive: true });
    const stamp = new Date().toISOString().replace(/\.\d{3}Z$/, "Z").replace(/:/g, "-");
    writeFileSync(join(dir, `warmpool-ramp-${stamp}.json`), `${JSON.stringify(result, null, 2)}\n`);
    writeFileSync(join(dir, `warmpool-ramp-${stamp}.md`), markdown(result));
    console.error(`wrote tests/bench/results/warmpool-ramp-${stamp}.{json,md}`);
  }
}
