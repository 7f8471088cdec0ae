// Before and after, interleaved in one run (issue 17: the bounds must not cost the honest path). Two revisions'
// sandbox-e2b binaries run side by side against ONE simulator, ONE guest and ONE raw client, so the only thing that
// differs between the legs is the binary: create -> kill through the e2b surface, a small request through the envd
// proxy, and a 200 MB download through it. A second process of the before tree runs as a third leg (A/A): how far
// two identical binaries drift apart in the same run is the noise the after leg is judged against.
//
//   E2B_BENCH_BEFORE=/work/wt/before bun run bench -- e2b
//     (the before tree: `git worktree add --detach /work/wt/before <rev> && ln -s $PWD/node_modules /work/wt/before/`;
//      default /work/wt/before; without it the group is skipped and says so)
//
// The legs take turns in short blocks, the order rotating every round, so a burst of foreign load hits all of them.
// Each block gives one figure per leg (its p50, or its MB/s); each round's after ÷ before and before-again ÷ before
// are the paired ratios. The after leg is within noise when its median paired ratio lies inside the A/A ratios'
// p10-p90 band.
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { startSimCluster } from "#services/sandboxd-sim/sim.ts";
import { startTestGuest } from "../integration/e2b/guest.ts";
import { spawnService, type Child } from "../integration/e2b/process.ts";
import { DOMAIN, KEY, ROOT, benchE2bFlags, createKill } from "./e2b-relay.bench.ts";
import { connectTo, cpuSeconds, getOver } from "./relay-cpu.bench.ts";
import { cores, percentile, type Figure } from "./vk-sandbox-pods.bench.ts";

const COMMAND = "E2B_BENCH_BEFORE=<tree> bun run bench -- e2b";
const HERE = resolve(import.meta.dir, "../..");
const CYCLE_ROUNDS = 20;
const CYCLE_BLOCK = 40;
const SMALL_ROUNDS = 20;
const SMALL_BLOCK = 100;
/** Enough rounds that the A/A band is a band: with four, p10-p90 is min-max of four ratios. */
const DOWNLOAD_ROUNDS = 8;

interface Side {
  name: string;
  root: string;
  child: Child;
  api: string;
  proxyPort: number;
  /** Per block: p50 of create -> kill (ms), the child's CPU per cycle (ms). */
  cycleP50: number[];
  cycleCpu: number[];
  cycles: number[];
  /** Per block: p50 of a small request (ms), the child's CPU per request (ms). */
  smallP50: number[];
  smallCpu: number[];
  small: number[];
  /** Per round: MB/s of one 200 MB download. */
  mbs: number[];
}

const revisionOf = (root: string) => Bun.spawnSync(["git", "-C", root, "rev-parse", "--short", "HEAD"]).stdout.toString().trim() || "unknown";

async function cycle(api: string): Promise<number> {
  const t = performance.now();
  await createKill(api);
  return performance.now() - t;
}

/** Each round, every leg once, the order rotated by the round's index. */
async function rounds(sides: Side[], n: number, run: (s: Side) => Promise<void>): Promise<void> {
  for (let r = 0; r < n; r++) for (let i = 0; i < sides.length; i++) await run(sides[(r + i) % sides.length]!);
}

/** The median of each round's a ÷ b, and the p10-p90 of those ratios. */
function paired(a: number[], b: number[]) {
  const ratios = a.map((x, i) => x / b[i]!);
  return { median: percentile(ratios, 50), p10: percentile(ratios, 10), p90: percentile(ratios, 90) };
}

/** A single 200 MB download through the proxy at `port`, bytes counted as they arrive; MB/s. */
async function download(port: number, host: string, token: string, size: number): Promise<number> {
  const t = performance.now();
  const s = await connectTo(port);
  let n = 0;
  await new Promise<void>((ok, fail) => {
    s.on("data", (c: Buffer) => void (n += c.length));
    s.once("error", fail);
    s.once("end", () => ok());
    s.write(`GET /download?size=${size} HTTP/1.1\r\nHost: ${host}\r\nX-Access-Token: ${token}\r\nConnection: close\r\n\r\n`);
  });
  s.destroy();
  if (n < size) throw new Error(`short body ${n}`);
  return size / 1024 / 1024 / ((performance.now() - t) / 1000);
}

export async function e2bBeforeAfterFigures(): Promise<Figure[]> {
  const before = resolve(process.env.E2B_BENCH_BEFORE ?? "/work/wt/before");
  if (!existsSync(join(before, "services/sandbox-e2b/main.ts"))) {
    console.error(`bench: e2b-ab skipped: no tree at ${before} (set E2B_BENCH_BEFORE to a worktree of the revision to compare)`);
    return [];
  }
  const beforeRev = revisionOf(before);
  const afterRev = revisionOf(HERE);
  const cluster = await startSimCluster(1, { rootToken: ROOT, pools: ["img/none/small=64"] });
  const sim = cluster.nodes[0]!;
  const guest = await startTestGuest();
  sim.attachGuest("*", 49983, guest.port);
  const dir = mkdtempSync(join(tmpdir(), "bench-e2b-ab-"));
  const flags = benchE2bFlags(sim.addr, dir);
  const sides: Side[] = [];
  const socks: net.Socket[] = [];
  try {
    for (const [name, root] of [
      [`before (${beforeRev})`, before],
      [`before again (${beforeRev}, A/A)`, before],
      [`after (${afterRev})`, HERE],
    ] as const) {
      const child = spawnService("sandbox-e2b", flags, { OPERATOR_LOG_LEVEL: "info" }, root);
      sides.push({ name, root, child, api: "", proxyPort: 0, cycleP50: [], cycleCpu: [], cycles: [], smallP50: [], smallCpu: [], small: [], mbs: [] });
    }
    for (const s of sides) {
      s.api = `http://127.0.0.1:${(await s.child.waitFor("e2b surface listening")).port}`;
      s.proxyPort = Number((await s.child.waitFor("envd proxy listening")).port);
    }
    await Bun.sleep(1_500); // one poll with the pool filled

    // create -> kill, concurrency 1: warm-up long enough for the JIT to settle, then blocks of 40 cycles.
    for (const s of sides) for (let i = 0; i < 300; i++) await cycle(s.api);
    await rounds(sides, CYCLE_ROUNDS, async (s) => {
      const c0 = cpuSeconds(s.child.proc.pid);
      const block: number[] = [];
      for (let i = 0; i < CYCLE_BLOCK; i++) block.push(await cycle(s.api));
      s.cycleCpu.push(((cpuSeconds(s.child.proc.pid) - c0) * 1000) / block.length);
      s.cycleP50.push(percentile(block, 50));
      s.cycles.push(...block);
    });

    // A small request (GET /health, 204) through each leg's proxy over one kept client connection; each request
    // opens a fresh node tunnel there, as every relayed request does.
    const targets = new Map<Side, { sock: net.Socket; request: string; host: string; token: string }>();
    for (const s of sides) {
      const r = await fetch(`${s.api}/v2/sandboxes`, { method: "POST", headers: { "x-api-key": KEY, "content-type": "application/json" }, body: '{"templateID":"img","timeout":3600}' });
      const sbx = (await r.json()) as { sandboxID: string; envdAccessToken: string };
      if (r.status !== 201) throw new Error(`${s.name}: create answered ${r.status}`);
      const host = `49983-${sbx.sandboxID}.${DOMAIN}`;
      const sock = await connectTo(s.proxyPort);
      socks.push(sock);
      targets.set(s, { sock, host, token: sbx.envdAccessToken, request: `GET /health HTTP/1.1\r\nHost: ${host}\r\nX-Access-Token: ${sbx.envdAccessToken}\r\nConnection: keep-alive\r\n\r\n` });
    }
    const small = async (s: Side, n: number) => {
      const { sock, request } = targets.get(s)!;
      const block: number[] = [];
      for (let i = 0; i < n; i++) {
        const t = performance.now();
        const status = await getOver(sock, request);
        block.push(performance.now() - t);
        if (status !== 204) throw new Error(`${s.name}: /health answered ${status}`);
      }
      return block;
    };
    for (const s of sides) await small(s, 500);
    await rounds(sides, SMALL_ROUNDS, async (s) => {
      const c0 = cpuSeconds(s.child.proc.pid);
      const block = await small(s, SMALL_BLOCK);
      s.smallCpu.push(((cpuSeconds(s.child.proc.pid) - c0) * 1000) / block.length);
      s.smallP50.push(percentile(block, 50));
      s.small.push(...block);
    });

    // 200 MB down through each leg's proxy, one download a leg a round.
    const SIZE = 200 * 1024 * 1024;
    await rounds(sides, DOWNLOAD_ROUNDS, async (s) => {
      const { host, token } = targets.get(s)!;
      s.mbs.push(await download(s.proxyPort, host, token, SIZE));
    });
  } finally {
    for (const sock of socks) sock.destroy();
    for (const s of sides) await s.child.stop();
    await guest.stop();
    await cluster.stop();
    rmSync(dir, { recursive: true, force: true });
  }

  const [b, aa, after] = sides as [Side, Side, Side];
  const figure = (name: string, unit: string, value: (s: Side) => number, perRound: (s: Side) => number[], higherIsBetter: boolean, extra: string): Figure => {
    const ab = paired(perRound(after), perRound(b));
    const noise = paired(perRound(aa), perRound(b));
    const inside = ab.median >= noise.p10 && ab.median <= noise.p90;
    // Worse by more than noise: slower (ratio above the band) or less throughput (below it).
    const verdict = inside ? "within noise" : (higherIsBetter ? ab.median < noise.p10 : ab.median > noise.p90) ? "WORSE than noise" : "better than noise";
    return {
      name: `e2b before/after: ${name}`,
      value: +value(after).toFixed(3),
      unit,
      baseline: { name: b.name, value: +value(b).toFixed(3), unit },
      command: COMMAND,
      cores,
      notes:
        `${verdict}: after ÷ before per round median ${ab.median.toFixed(3)} (p10-p90 ${ab.p10.toFixed(3)}-${ab.p90.toFixed(3)}); ` +
        `A/A (a second before process ÷ before) median ${noise.median.toFixed(3)}, p10-p90 ${noise.p10.toFixed(3)}-${noise.p90.toFixed(3)}; ` +
        `A/A leg itself ${value(aa).toFixed(3)} ${unit}; ${extra}; one simulator, guest and client for all three legs`,
    };
  };
  const cpu = (xs: (s: Side) => number[]) => `child CPU per op (median of blocks) before ${percentile(xs(b), 50).toFixed(3)}, A/A ${percentile(xs(aa), 50).toFixed(3)}, after ${percentile(xs(after), 50).toFixed(3)} ms`;
  return [
    figure("e2b create->kill p50, concurrency 1", "ms", (s) => percentile(s.cycles, 50), (s) => s.cycleP50, false, `${CYCLE_ROUNDS} rounds of ${CYCLE_BLOCK} cycles a leg after 300 warm-up; ${cpu((s) => s.cycleCpu)}`),
    figure("e2b create->kill p99, concurrency 1", "ms", (s) => percentile(s.cycles, 99), (s) => s.cycleP50, false, `p99 over all ${CYCLE_ROUNDS * CYCLE_BLOCK} cycles; the paired ratios are of the blocks' p50`),
    figure("relay small request p50 (fresh tunnel per request)", "ms", (s) => percentile(s.small, 50), (s) => s.smallP50, false, `${SMALL_ROUNDS} rounds of ${SMALL_BLOCK} GET /health a leg after 500 warm-up; ${cpu((s) => s.smallCpu)}`),
    figure("relay 200 MB download", "MB/s", (s) => percentile(s.mbs, 50), (s) => s.mbs, true, `median of ${DOWNLOAD_ROUNDS} rounds, one raw-socket client`),
  ];
}

if (import.meta.main) for (const f of await e2bBeforeAfterFigures()) console.log(JSON.stringify(f));
