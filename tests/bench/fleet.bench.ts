// Issue 29 item 4: the readers at fleet size. A simulated fleet (tests/kube/fleet.ts: many nodes in this process,
// each publishing with vk-sandbox's own InventoryPublisher, Nodes included so the trust check holds) on the real
// kube-apiserver, plus one real node (the sandboxd simulator with the test guest, published the same way) where the
// e2b surface places its sandboxes. The readers run as their own processes: sandbox-apiserver (aggregated API with
// its e2b surface, --enable-e2b-api) behind the aggregator, and sandbox-envd-proxy. Every figure is measured first
// with 2 simulated nodes, then the fleet grows to its full size in the same run and the same figures are measured
// again; each is given as a ratio to its 2-node value:
//   - each reader's CPU per steady publish wave (every node publishes once, nothing changed) and its RSS after;
//   - e2b create and kill p50/p99 (REST, through sandbox-apiserver's e2b surface);
//   - the proxy's first request to a sandbox created a moment ago (not yet in any inventory);
//   - kubectl get sandboxes -n <one namespace> and -A, through the aggregator;
//   - how long a restarted reader takes to serve again.
// Both readers run with --inventory-stale-after=1h: the bench publishes in explicit waves (so each wave's cost is
// measured alone), and at full size one kubectl -A takes longer than the default window between two waves.
//
//   bun run bench -- fleet                                   the group (FLEET_NODES × FLEET_SANDBOXES, default 200 × 2000)
//   FLEET_NODES=4 FLEET_SANDBOXES=100 bun tests/bench/fleet.bench.ts   prints the run as JSON
import { join } from "node:path";
import { startSandboxdSim } from "#services/sandboxd-sim/sim.ts";
import { InventoryPublisher } from "#services/vk-sandbox/inventory/index.ts";
import { KubeClient, loadKubeConnection } from "#shared/kube/index.ts";
import { SandboxdClient } from "#shared/sandboxd/client.ts";
import { writeFileSync } from "node:fs";
import { SimulatedFleet } from "../kube/fleet.ts";
import { vouchingNode } from "../kube/nodes.ts";
import { kubectl } from "../kube/kubectl.ts";
import { freePorts } from "../kube/ports.ts";
import { startStack, type ApiserverProcess } from "../integration/sandbox-apiserver/fixture.ts";
import { startTestGuest } from "../integration/e2b/guest.ts";
import { spawnService, type Child } from "../integration/e2b/process.ts";
import { e2bServerArgs, writeE2bFiles } from "../support/e2b-apiserver.ts";
import { waitFor } from "../support/wait.ts";
import { cores, percentile, type Figure } from "./vk-sandbox-pods.bench.ts";

const COMMAND = "bun run bench -- fleet";
const ROOT = "fleet-root-token";
const KEY = "e2b_fleetbenchkey00000000000000000000000";
const E2B_NS = "e2b-fleet";
const DOMAIN = "sb.test";
const REAL = "fleet-real";
const quiet = { info() {}, warn() {}, debug() {}, error() {} };
const round = (x: number, d = 1) => Math.round(x * 10 ** d) / 10 ** d;
const MiB = 1024 * 1024;

export interface FleetBenchOptions {
  nodes: number;
  sandboxesPerNode: number;
  /** Sequential create+kill cycles per size. */
  cycles?: number;
  /** First proxy requests per size. */
  firstRequests?: number;
  log?: (msg: string) => void;
}

/** One size's measurements. */
export interface SizeFigures {
  nodes: number;
  rows: number;
  /** The wave that grew the fleet to this size (every shard written): wall time, and each reader's CPU for it. */
  load: { ms: number; appliedBytes: number; apiserverCpuMs: number; proxyCpuMs: number };
  wave: { ms: number; appliedBytes: number; apiserverCpuMs: number; proxyCpuMs: number; apiserverRss: number; proxyRss: number };
  create: { p50: number; p99: number };
  kill: { p50: number; p99: number };
  firstRequest: { p50: number; p99: number };
  kubectlNs: { ms: number; rows: number };
  kubectlAll: { ms: number; rows: number };
  restart: { apiserverMs: number; proxyMs: number };
}

export interface FleetRun {
  small: SizeFigures;
  full: SizeFigures;
  wallMs: number;
  peakRss: { kubeApiserver: number; harness: number; apiserver: number; proxy: number };
  namespaceRows: number;
}

/** utime + stime of a process in ms (10 ms ticks). */
async function cpuMs(pid: number): Promise<number> {
  const stat = await Bun.file(`/proc/${pid}/stat`).text();
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(f[11]) + Number(f[12])) * 10;
}

async function statusKb(pid: number, field: "VmRSS" | "VmHWM"): Promise<number> {
  const status = await Bun.file(`/proc/${pid}/status`).text();
  return Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(status)?.[1] ?? NaN) * 1024;
}

/** Until each process's CPU has grown by less than 20 ms over 2 s (it has handled what the wave sent), at most `maxMs`. */
async function cpuSettled(pids: number[], maxMs: number): Promise<void> {
  const end = performance.now() + maxMs;
  let last = await Promise.all(pids.map(cpuMs));
  while (performance.now() < end) {
    await Bun.sleep(2000);
    const now = await Promise.all(pids.map(cpuMs));
    if (now.every((c, i) => c - last[i]! < 20)) return;
    last = now;
  }
}

export async function runFleetBench(o: FleetBenchOptions): Promise<FleetRun> {
  const say = o.log ?? ((m: string) => console.error(`fleet: ${m}`));
  const cycles = o.cycles ?? 30;
  const firstRequests = o.firstRequests ?? 15;
  const started = performance.now();
  const stack = await startStack();
  const stops: (() => Promise<unknown> | unknown)[] = [() => stack.stop()];
  try {
    // The real node: the simulator with the shared test guest, published by vk-sandbox's publisher.
    const sim = await startSandboxdSim({ rootToken: ROOT, pools: ["img:1/none/small=8"] });
    stops.push(() => sim.stop());
    const guest = await startTestGuest();
    stops.push(() => guest.stop());
    sim.attachGuest("*", 49983, guest.port);
    await vouchingNode(stack.cluster, REAL, sim.addr);
    const conn = await loadKubeConnection({ KUBECONFIG: stack.admin });
    const kube = new KubeClient(conn);
    const real = new InventoryPublisher({
      kube,
      sandboxd: new SandboxdClient({ baseUrl: sim.url, token: ROOT }),
      nodeName: REAL,
      address: sim.addr,
      ownAddresses: () => new Map(),
      intervalMs: 30_000,
      log: quiet,
    });
    const namespaces = Math.max(1, Math.round((o.nodes * o.sandboxesPerNode) / 1000));
    const fleet = new SimulatedFleet({ cluster: stack.cluster, kube, sandboxesPerNode: o.sandboxesPerNode, namespaces });
    stops.push(() => fleet.stop());
    const wave = async () => {
      const [w, r] = await Promise.all([fleet.publishWave(), real.publishOnce()]);
      if (w.failed.length || !r.published) throw new Error(`publish wave: ${w.failed.length} node(s) failed (${w.failed[0]?.node}: ${w.failed[0]?.reason})${r.published ? "" : `; the real node: ${r.reason}`}`);
      return w;
    };

    await fleet.addNodes(2);
    await wave();

    writeE2bFiles(stack.dir, `${KEY} ${E2B_NS}\n`);
    writeFileSync(join(stack.dir, "token"), `${ROOT}\n`);
    const [e2bPort] = freePorts(1);
    const e2bUrl = `http://127.0.0.1:${e2bPort}`;
    const serverArgs = [...e2bServerArgs({ rootToken: ROOT, port: e2bPort, dir: stack.dir, domain: DOMAIN }), "--canary-interval=0", "--inventory-stale-after=1h"];
    let server: ApiserverProcess = await stack.startServer({ args: serverArgs });
    stops.push(() => server.stop());
    await stack.register(server.port);
    const proxyArgs = ["--bind-address=127.0.0.1:0", `--domain=${DOMAIN}`, `--e2b-envd-secret-file=${join(stack.dir, "secret")}`, `--sandboxd-token-file=${join(stack.dir, "token")}`, "--inventory-stale-after=1h"];
    const spawnProxy = async (): Promise<{ child: Child; port: number }> => {
      const child = spawnService("sandbox-envd-proxy", proxyArgs, { KUBECONFIG: stack.admin });
      const line = await child.waitFor("envd proxy listening", 1_800_000);
      return { child, port: Number(line.port) };
    };
    let proxy = await spawnProxy();
    stops.push(() => proxy.child.stop());
    const peak = { apiserver: 0, proxy: 0 };
    const notePeaks = async () => {
      peak.apiserver = Math.max(peak.apiserver, await statusKb(server.proc.pid, "VmHWM"));
      peak.proxy = Math.max(peak.proxy, await statusKb(proxy.child.proc.pid, "VmHWM"));
    };

    // A sandbox of the simulated fleet, by name, through the aggregator: 200 once the reader holds it.
    const probeName = { ns: fleet.namespaceOf(1), name: "sbx-1" };
    const aggregatedGet = async () => {
      const r = await stack.cluster.adminFetch(`/apis/agents.x-k8s.io/v1beta1/namespaces/${probeName.ns}/sandboxes/${probeName.name}`);
      await r.body?.cancel();
      return r.status;
    };
    await waitFor("the aggregated API to serve a simulated sandbox", async () => (await aggregatedGet()) === 200, 120_000);

    const create = async (): Promise<{ sandboxID: string; envdAccessToken: string }> => {
      const r = await fetch(`${e2bUrl}/sandboxes`, { method: "POST", headers: { "x-api-key": KEY, "content-type": "application/json" }, body: JSON.stringify({ templateID: "base", timeout: 600 }) });
      if (r.status !== 201) throw new Error(`e2b create: ${r.status} ${await r.text()}`);
      return (await r.json()) as { sandboxID: string; envdAccessToken: string };
    };
    const kill = async (id: string) => {
      const r = await fetch(`${e2bUrl}/sandboxes/${id}`, { method: "DELETE", headers: { "x-api-key": KEY } });
      await r.body?.cancel();
      if (r.status !== 204) throw new Error(`e2b kill ${id}: ${r.status}`);
    };
    const proxied = async (sbx: { sandboxID: string; envdAccessToken: string }) => {
      const r = await fetch(`http://127.0.0.1:${proxy.port}/health`, { headers: { host: `49983-${sbx.sandboxID}.${DOMAIN}`, "x-access-token": sbx.envdAccessToken } });
      await r.body?.cancel();
      if (r.status !== 204) throw new Error(`proxy first request to ${sbx.sandboxID}: ${r.status}`);
    };
    const kubectlGet = async (args: string[], expected: number): Promise<{ ms: number; rows: number }> => {
      const t0 = performance.now();
      const r = await kubectl(["get", "sandboxes", ...args, "--no-headers"], { kubeconfig: stack.admin, timeoutMs: 1_800_000 });
      const ms = performance.now() - t0;
      if (r.code !== 0) throw new Error(`kubectl get sandboxes ${args.join(" ")}: exit ${r.code}: ${r.stderr.slice(0, 500)}`);
      const rows = r.stdout.split("\n").filter((l) => l.trim()).length;
      if (rows !== expected) throw new Error(`kubectl get sandboxes ${args.join(" ")}: ${rows} rows, expected ${expected}`);
      return { ms, rows };
    };

    const measure = async (load: SizeFigures["load"]): Promise<SizeFigures> => {
      const nodes = fleet.nodes.length;
      const rows = fleet.totalRows;
      say(`measuring at ${nodes} nodes × ${o.sandboxesPerNode} (${rows} rows)`);
      // Steady waves: every node publishes again with nothing changed.
      const waves: SizeFigures["wave"][] = [];
      for (let k = 0; k < 2; k++) {
        const pids = [server.proc.pid, proxy.child.proc.pid];
        const [a0, p0] = await Promise.all(pids.map(cpuMs));
        const w = await wave();
        await cpuSettled(pids, 600_000);
        const [a1, p1] = await Promise.all(pids.map(cpuMs));
        waves.push({ ms: w.ms, appliedBytes: w.appliedBytes, apiserverCpuMs: a1! - a0!, proxyCpuMs: p1! - p0!, apiserverRss: await statusKb(pids[0]!, "VmRSS"), proxyRss: await statusKb(pids[1]!, "VmRSS") });
      }
      await notePeaks();
      const mean = (f: (w: SizeFigures["wave"]) => number) => waves.reduce((n, w) => n + f(w), 0) / waves.length;
      const steady = { ms: mean((w) => w.ms), appliedBytes: mean((w) => w.appliedBytes), apiserverCpuMs: mean((w) => w.apiserverCpuMs), proxyCpuMs: mean((w) => w.proxyCpuMs), apiserverRss: waves.at(-1)!.apiserverRss, proxyRss: waves.at(-1)!.proxyRss };
      say(`wave ${round(steady.ms)} ms; apiserver ${steady.apiserverCpuMs} ms CPU, proxy ${steady.proxyCpuMs} ms CPU`);

      // e2b create and kill, one at a time.
      const creates: number[] = [];
      const kills: number[] = [];
      for (let k = 0; k < 3; k++) await kill((await create()).sandboxID); // warm-up
      for (let k = 0; k < cycles; k++) {
        let t0 = performance.now();
        const s = await create();
        creates.push(performance.now() - t0);
        t0 = performance.now();
        await kill(s.sandboxID);
        kills.push(performance.now() - t0);
      }
      // The proxy's first request to a sandbox no inventory lists yet.
      const firsts: number[] = [];
      for (let k = 0; k < firstRequests; k++) {
        const s = await create();
        const t0 = performance.now();
        await proxied(s);
        firsts.push(performance.now() - t0);
        await kill(s.sandboxID);
      }
      say(`create p50 ${round(percentile(creates, 50), 2)} ms, kill p50 ${round(percentile(kills, 50), 2)} ms, first request p50 ${round(percentile(firsts, 50), 2)} ms`);

      const ns = probeName.ns;
      const nsRows = fleet.rowsIn(ns);
      const kNs: number[] = [];
      for (let k = 0; k < 3; k++) kNs.push((await kubectlGet(["-n", ns], nsRows)).ms);
      // -A also lists the real node's sandboxes: none are left (every create above was killed) once it republished.
      await real.publishOnce();
      await waitFor("the real node's sandboxes to be gone from the aggregated list", async () => {
        const r = await stack.cluster.adminFetch(`/apis/agents.x-k8s.io/v1beta1/namespaces/${E2B_NS}/sandboxes`);
        const body = (await r.json()) as { items?: unknown[] };
        return r.ok && (body.items?.length ?? 0) === 0;
      }, 60_000);
      const all = await kubectlGet(["-A"], rows);
      await notePeaks();
      say(`kubectl -n ${ns} (${nsRows}) ${round(percentile(kNs, 50))} ms; -A (${rows}) ${round(all.ms)} ms`);

      // Restarted readers: until each serves again (the aggregated GET of a simulated sandbox; the proxy listening,
      // which it does only once its fleet view has synced).
      const port = server.port;
      await server.stop();
      let t0 = performance.now();
      server = await stack.startServer({ args: serverArgs, port, waitReady: false });
      await waitFor("the restarted sandbox-apiserver to serve", async () => (await aggregatedGet().catch(() => 0)) === 200, 1_800_000, 50);
      const apiserverMs = performance.now() - t0;
      await proxy.child.stop();
      t0 = performance.now();
      proxy = await spawnProxy();
      const proxyMs = performance.now() - t0;
      say(`restart: apiserver ${round(apiserverMs)} ms, proxy ${round(proxyMs)} ms`);
      await notePeaks();
      return {
        nodes,
        rows,
        load,
        wave: steady,
        create: { p50: percentile(creates, 50), p99: percentile(creates, 99) },
        kill: { p50: percentile(kills, 50), p99: percentile(kills, 99) },
        firstRequest: { p50: percentile(firsts, 50), p99: percentile(firsts, 99) },
        kubectlNs: { ms: percentile(kNs, 50), rows: nsRows },
        kubectlAll: all,
        restart: { apiserverMs, proxyMs },
      };
    };

    const small = await measure({ ms: 0, appliedBytes: 0, apiserverCpuMs: 0, proxyCpuMs: 0 });

    // Grow to full size: the new nodes register and publish their first (whole) inventory, in batches.
    const grown = fleet.nodes.length;
    const pids = [server.proc.pid, proxy.child.proc.pid];
    const [a0, p0] = await Promise.all(pids.map(cpuMs));
    const t0 = performance.now();
    let appliedBytes = 0;
    for (let added = grown; added < o.nodes; ) {
      const batch = await fleet.addNodes(Math.min(20, o.nodes - added));
      added += batch.length;
      const w = await fleet.publishWave(batch);
      if (w.failed.length) throw new Error(`first publish: ${w.failed.length} node(s) failed (${w.failed[0]?.node}: ${w.failed[0]?.reason})`);
      appliedBytes += w.appliedBytes;
      say(`${added} nodes published`);
    }
    const loadMs = performance.now() - t0;
    await cpuSettled(pids, 1_800_000);
    const [a1, p1] = await Promise.all(pids.map(cpuMs));
    await notePeaks();
    const full = await measure({ ms: loadMs, appliedBytes, apiserverCpuMs: a1! - a0!, proxyCpuMs: p1! - p0! });
    const run: FleetRun = {
      small,
      full,
      wallMs: performance.now() - started,
      peakRss: { kubeApiserver: await statusKb(stack.cluster.pid, "VmHWM"), harness: await statusKb(process.pid, "VmHWM"), apiserver: peak.apiserver, proxy: peak.proxy },
      namespaceRows: full.kubectlNs.rows,
    };
    return run;
  } finally {
    for (const stop of stops.reverse()) await Promise.resolve(stop()).catch(() => undefined);
  }
}

export function fleetFiguresOf(run: FleetRun, o: FleetBenchOptions): Figure[] {
  const { small, full } = run;
  const size = `${full.nodes} nodes × ${o.sandboxesPerNode} (${full.rows} rows)`;
  const base = `2 nodes × ${o.sandboxesPerNode} (${small.rows} rows), same run`;
  const cost =
    `run: ${round(run.wallMs / 60_000, 1)} min wall; peak RSS kube-apiserver (embedded etcd) ${round(run.peakRss.kubeApiserver / MiB)} MiB, ` +
    `sandbox-apiserver ${round(run.peakRss.apiserver / MiB)} MiB, envd-proxy ${round(run.peakRss.proxy / MiB)} MiB, harness (every simulated node, the simulator, kubectl's parent) ${round(run.peakRss.harness / MiB)} MiB; ` +
    `growing to full size took ${round(full.load.ms / 1000, 1)} s (${round(full.load.appliedBytes / MiB)} MiB applied; reader CPU apiserver ${round(full.load.apiserverCpuMs / 1000, 1)} s, proxy ${round(full.load.proxyCpuMs / 1000, 1)} s)`;
  const out: Figure[] = [];
  const fig = (name: string, value: number, unit: string, baseline: number, notes: string) =>
    out.push({ name: `fleet ${size}: ${name}`, value: round(value, 2), unit, command: COMMAND, cores, baseline: { name: base, value: round(baseline, 2), unit }, anchor: "issue 29 item 4", notes: `${notes}; ${cost}` });
  const wave = (w: SizeFigures["wave"]) => `a wave (every node publishes once, nothing changed) took ${round(w.ms)} ms and applied ${round(w.appliedBytes / 1024)} KiB`;
  fig("sandbox-apiserver CPU per steady publish wave", full.wave.apiserverCpuMs, "ms", small.wave.apiserverCpuMs, `${wave(full.wave)} (2 nodes: ${wave(small.wave)}); mean of 2 waves, /proc utime+stime until the process was idle again`);
  fig("sandbox-envd-proxy CPU per steady publish wave", full.wave.proxyCpuMs, "ms", small.wave.proxyCpuMs, "mean of 2 waves, /proc utime+stime until the process was idle again");
  fig("sandbox-apiserver RSS after a wave", full.wave.apiserverRss / MiB, "MiB", small.wave.apiserverRss / MiB, `per row above the 2-node figure: ${round((full.wave.apiserverRss - small.wave.apiserverRss) / (full.rows - small.rows))} B`);
  fig("sandbox-envd-proxy RSS after a wave", full.wave.proxyRss / MiB, "MiB", small.wave.proxyRss / MiB, `per row above the 2-node figure: ${round((full.wave.proxyRss - small.wave.proxyRss) / (full.rows - small.rows))} B`);
  fig("e2b create p50", full.create.p50, "ms", small.create.p50, `REST POST /sandboxes through sandbox-apiserver's e2b surface, placed on the one real node; p99 ${round(full.create.p99, 2)} ms vs ${round(small.create.p99, 2)} ms`);
  fig("e2b create p99", full.create.p99, "ms", small.create.p99, "sequential cycles after 3 warm-up");
  fig("e2b kill p50", full.kill.p50, "ms", small.kill.p50, `REST DELETE /sandboxes/{id}; p99 ${round(full.kill.p99, 2)} ms vs ${round(small.kill.p99, 2)} ms`);
  fig("e2b kill p99", full.kill.p99, "ms", small.kill.p99, "sequential cycles after 3 warm-up");
  fig("envd proxy: first request to a fresh sandbox, p50", full.firstRequest.p50, "ms", small.firstRequest.p50, `GET /health through sandbox-envd-proxy right after create (no inventory lists it yet: the proxy probes the fresh nodes); p99 ${round(full.firstRequest.p99, 2)} ms vs ${round(small.firstRequest.p99, 2)} ms`);
  fig("envd proxy: first request to a fresh sandbox, p99", full.firstRequest.p99, "ms", small.firstRequest.p99, "each simulated node's address answers sandboxd's 404");
  fig(`kubectl get sandboxes -n <one namespace> (${full.kubectlNs.rows} rows)`, full.kubectlNs.ms, "ms", small.kubectlNs.ms, `median of 3; ${small.kubectlNs.rows} rows at 2 nodes; includes kubectl's start-up and discovery`);
  fig(`kubectl get sandboxes -A (${full.kubectlAll.rows} rows)`, full.kubectlAll.ms, "ms", small.kubectlAll.ms, `one run; ${small.kubectlAll.rows} rows at 2 nodes`);
  fig("restarted sandbox-apiserver: until it serves a fleet sandbox again", full.restart.apiserverMs, "ms", small.restart.apiserverMs, "from spawn to the first 200 of a GET through the aggregator");
  fig("restarted sandbox-envd-proxy: until it listens (its fleet view synced)", full.restart.proxyMs, "ms", small.restart.proxyMs, "from spawn to its 'envd proxy listening' line, logged after the NodeInventory, shard and Node informers synced");
  return out;
}

export function fleetOptions(env = process.env): FleetBenchOptions {
  return { nodes: Number(env.FLEET_NODES ?? 200), sandboxesPerNode: Number(env.FLEET_SANDBOXES ?? 2000) };
}

export async function fleetFigures(): Promise<Figure[]> {
  const o = fleetOptions();
  return fleetFiguresOf(await runFleetBench(o), o);
}

if (import.meta.main) {
  const o = fleetOptions();
  console.log(JSON.stringify(await runFleetBench(o), null, 2));
}
