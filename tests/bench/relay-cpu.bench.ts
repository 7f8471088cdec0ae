// The relay's CPU per small request, A/B (issue 17: the honest request must cost what it cost before the bounds).
// Each relay under test runs alone in its own process (relay-cpu-child.ts), so the figure is that process's
// user+system CPU (/proc) per proxied `GET /health` over one raw keep-alive client: a fresh node tunnel per
// request, owner primed, the same simulator and guest for all. CPU time, unlike latency, does not count time spent
// waiting for a core, so the A/B holds up on the shared machine. Legs run interleaved in blocks (the order rotated
// every round) and each figure is the median of its blocks.
//
//   bun run tests/bench/relay-cpu.bench.ts before=/work/wt/before:serve main=.:serve idle0=.:idle0 [--n=20000]
//   bun run bench -- relay-cpu     this tree's listener vs before (RELAY_CPU_BEFORE=<tree of 53ceb11>) and ablations
import { spawn } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import net from "node:net";
import { resolve } from "node:path";
import { startSimCluster } from "#services/sandboxd-sim/sim.ts";
import { publicSandboxId } from "#shared/envd-token/index.ts";
import { SandboxdClient } from "#shared/sandboxd/client.ts";
import { startTestGuest } from "../integration/e2b/guest.ts";
import { startRelayFrom, type RelaySpec } from "./relay-cpu-child.ts";
import { cores, percentile, type Figure } from "./vk-sandbox-pods.bench.ts";

const ROOT = "bench-root";
const DOMAIN = "bench.test";
const SECRET = "bench-secret";
const CHILD = resolve(import.meta.dir, "relay-cpu-child.ts");

export interface Leg {
  name: string;
  /** The tree the relay is loaded from. */
  root: string;
  /**
   * serve/idle0/raw: the relay alone in a child process (relay-cpu-child.ts). inproc: the tree's serveRelay in this
   * process, next to the simulator, guest and client, as the e2b bench's "own work" leg runs it; its CPU figure is
   * then this whole process's, so compare inproc legs with each other only.
   */
  listener: "serve" | "idle0" | "raw" | "inproc";
}

/**
 * CPU seconds a process (all its threads) has run so far, from the scheduler's nanosecond accounting
 * (/proc/<pid>/task/<tid>/schedstat); /proc/<pid>/stat counts in 10 ms ticks, too coarse for short blocks.
 */
export function cpuSeconds(pid: number): number {
  let ns = 0;
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      ns += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, "utf8").split(" ")[0]);
    } catch {
      // the thread ended between the listing and the read
    }
  }
  return ns / 1e9;
}

/** One HTTP/1.1 GET over a kept socket; resolves once the Content-Length framed reply is in. */
export function getOver(sock: net.Socket, request: string): Promise<number> {
  return new Promise((done, fail) => {
    let buf: Buffer = Buffer.alloc(0);
    const onData = (c: Buffer) => {
      buf = buf.length === 0 ? c : Buffer.concat([buf, c]);
      const end = buf.indexOf("\r\n\r\n");
      if (end < 0) return;
      const head = buf.subarray(0, end).toString();
      const len = Number(/content-length: *(\d+)/i.exec(head)?.[1] ?? "0");
      if (buf.length >= end + 4 + len) {
        sock.off("data", onData);
        sock.off("error", fail);
        done(Number(head.slice(9, 12)));
      }
    };
    sock.on("data", onData);
    sock.on("error", fail);
    sock.write(request);
  });
}

interface Running {
  leg: Leg;
  pid: number;
  sock: net.Socket;
  request: string;
  stop(): void;
  perRequestMs: number[];
  latencyMs: number[];
  /** This process's CPU per request in each block: the client, the simulator's ports relay and the guest. */
  restMs: number[];
}

export function connectTo(port: number): Promise<net.Socket> {
  return new Promise<net.Socket>((ok, fail) => {
    const s = net.connect({ host: "127.0.0.1", port }, () => ok(s));
    s.setNoDelay(true);
    s.once("error", fail);
  });
}

/** Extra bun flags for the relay processes, e.g. `--cpu-prof-md --cpu-prof-dir=/tmp/prof` to see where it goes. */
const childFlags = () => (process.env.RELAY_CPU_CHILD_FLAGS ?? "").split(" ").filter((f) => f !== "");

async function startLeg(leg: Leg, spec: RelaySpec, host: string): Promise<Running> {
  if (leg.listener === "inproc") {
    const relay = await startRelayFrom(resolve(leg.root), "serve", spec);
    const sock = await connectTo(relay.port);
    const request = `GET /health HTTP/1.1\r\nHost: ${host}\r\nX-Access-Token: ${relay.token}\r\nConnection: keep-alive\r\n\r\n`;
    return { leg, pid: process.pid, sock, request, stop: () => (sock.destroy(), relay.stop()), perRequestMs: [], latencyMs: [], restMs: [] };
  }
  const child = spawn(process.execPath, [...childFlags(), CHILD, resolve(leg.root), leg.listener, JSON.stringify(spec)], { stdio: ["ignore", "pipe", "inherit"] });
  const line = await new Promise<string>((ok, fail) => {
    let out = "";
    child.stdout.on("data", (c: Buffer) => {
      out += c.toString();
      const nl = out.indexOf("\n");
      if (nl >= 0) ok(out.slice(0, nl));
    });
    child.once("exit", (code) => fail(new Error(`relay child ${leg.name} exited ${code}`)));
  });
  const { port, token } = JSON.parse(line) as { port: number; token: string };
  const sock = await connectTo(port);
  const request = `GET /health HTTP/1.1\r\nHost: ${host}\r\nX-Access-Token: ${token}\r\nConnection: keep-alive\r\n\r\n`;
  return { leg, pid: child.pid!, sock, request, stop: () => (sock.destroy(), child.kill()), perRequestMs: [], latencyMs: [], restMs: [] };
}

async function block(r: Running, n: number): Promise<void> {
  const c0 = cpuSeconds(r.pid);
  const own0 = cpuSeconds(process.pid);
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    const status = await getOver(r.sock, r.request);
    r.latencyMs.push(performance.now() - t);
    if (status !== 204) throw new Error(`${r.leg.name}: /health answered ${status}`);
  }
  r.perRequestMs.push(((cpuSeconds(r.pid) - c0) * 1000) / n);
  r.restMs.push(((cpuSeconds(process.pid) - own0) * 1000) / n);
}

/** Relay CPU per request for each leg: the median over `rounds` interleaved blocks, and each block's figure. */
export interface LegResult {
  leg: Leg;
  /** Median of the blocks' CPU per request. */
  medianMs: number;
  blocksMs: number[];
  /** Median over rounds of this leg's block ÷ the first leg's block of the same round (drift cancels). */
  pairedRatio: number;
  latencyP50Ms: number;
  /** Median CPU per request of the bench process (client, simulator, guest) while this leg ran. */
  restMs: number;
}

export async function relayCpu(legs: Leg[], total = 20_000, blockSize = 500): Promise<LegResult[]> {
  const cluster = await startSimCluster(1, { rootToken: ROOT, pools: ["img/none/small=8"] });
  const sim = cluster.nodes[0]!;
  const guest = await startTestGuest();
  sim.attachGuest("*", 49983, guest.port);
  const running: Running[] = [];
  try {
    await Bun.sleep(200);
    const claimed = await new SandboxdClient({ baseUrl: sim.url, token: ROOT }).claim({ template: "img", claim_ref: "bench/cpu" });
    const claimToken = sim.claims().find((c) => c.id === claimed.id)!.token;
    const spec = { domain: DOMAIN, secret: SECRET, root: ROOT, claimId: claimed.id, address: sim.addr, claimToken };
    const host = `49983-${publicSandboxId(claimed.id)}.${DOMAIN}`;
    for (const leg of legs) running.push(await startLeg(leg, spec, host));
    // Warm-up: the JIT settles over the first few thousand requests.
    for (const r of running) await block(r, 2_000);
    for (const r of running) r.perRequestMs.length = r.latencyMs.length = r.restMs.length = 0;
    const rounds = Math.max(1, Math.round(total / blockSize));
    for (let i = 0; i < rounds; i++) {
      for (let j = 0; j < running.length; j++) await block(running[(i + j) % running.length]!, blockSize);
      guest.requests.length = 0; // the test guest records every request; keep its memory flat
    }
    const first = running[0]!.perRequestMs;
    return running.map((r) => ({
      leg: r.leg,
      medianMs: percentile(r.perRequestMs, 50),
      blocksMs: r.perRequestMs,
      pairedRatio: percentile(r.perRequestMs.map((x, i) => x / first[i]!), 50),
      latencyP50Ms: percentile(r.latencyMs, 50),
      restMs: percentile(r.restMs, 50),
    }));
  } finally {
    for (const r of running) r.stop();
    await guest.stop();
    await cluster.stop();
  }
}

/** `bun run bench -- relay-cpu`: this tree's listener against 53ceb11's (when its tree is at hand) and the ablations. */
export async function relayCpuFigures(): Promise<Figure[]> {
  const before = process.env.RELAY_CPU_BEFORE ?? "/work/wt/before";
  const here = resolve(import.meta.dir, "../..");
  const legs: Leg[] = [{ name: "this tree", root: here, listener: "serve" }, { name: "this tree, Bun idleTimeout 0", root: here, listener: "idle0" }];
  if (existsSync(resolve(before, "shared/relay/index.ts"))) legs.unshift({ name: "before (53ceb11)", root: before, listener: "serve" });
  const out = await relayCpu(legs);
  const base = out.find((o) => o.leg.name.startsWith("before")) ?? out[0]!;
  return out
    .filter((o) => o !== base)
    .map((o) => ({
      name: `relay CPU per small request: ${o.leg.name}`,
      value: +o.medianMs.toFixed(3),
      unit: "ms",
      baseline: { name: base.leg.name, value: +base.medianMs.toFixed(3), unit: "ms" },
      command: "bun run bench -- relay-cpu",
      cores,
      notes:
        `ratio ${(o.medianMs / base.medianMs).toFixed(3)} (medians), paired ratio ${o.pairedRatio.toFixed(3)} (median of each round's ratio); relay process CPU ` +
        `(schedstat, all threads) per GET /health (204, fresh node tunnel each), ${o.blocksMs.length} interleaved blocks of 500 after 2,000 warm-up; ` +
        `blocks p25-p75 ${percentile(o.blocksMs, 25).toFixed(3)}-${percentile(o.blocksMs, 75).toFixed(3)} ms (baseline ${percentile(base.blocksMs, 25).toFixed(3)}-${percentile(base.blocksMs, 75).toFixed(3)}); ` +
        `latency p50 ${o.latencyP50Ms.toFixed(3)} vs ${base.latencyP50Ms.toFixed(3)} ms`,
    }));
}

if (import.meta.main) {
  const args = process.argv.slice(2);
  const n = Number(args.find((a) => a.startsWith("--n="))?.slice(4) ?? 20_000);
  const legs: Leg[] = args
    .filter((a) => !a.startsWith("--"))
    .map((a) => {
      const [name, rest] = a.split("=") as [string, string];
      const [root, listener] = rest.split(":") as [string, Leg["listener"]];
      return { name, root, listener: listener ?? "serve" };
    });
  const t0 = performance.now();
  const out = await relayCpu(legs, n);
  const base = out[0]!;
  for (const o of out) {
    const q = (p: number) => percentile(o.blocksMs, p).toFixed(3);
    console.log(`${o.leg.name.padEnd(16)} CPU/request median ${o.medianMs.toFixed(4)} ms (blocks p25 ${q(25)}, p75 ${q(75)})  ratio ${(o.medianMs / base.medianMs).toFixed(3)}  paired ratio ${o.pairedRatio.toFixed(3)}  latency p50 ${o.latencyP50Ms.toFixed(3)} ms  bench process CPU/request ${o.restMs.toFixed(4)} ms`);
  }
  console.log(`(${((performance.now() - t0) / 1000).toFixed(0)} s, load ${readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ")})`);
  process.exit(0);
}
