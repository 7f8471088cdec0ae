// vk-sandbox pod path on a real kube-apiserver, the sandboxd simulator and the daemon as its own process:
//
// - latency: Pod created (bound to the node) → phase Running seen through a watch, p50/p99, with 1 Pod at a time
//   and 100 at once. Baseline in the same run: created → the watch's ADDED event for the same Pods, the floor any
//   kubelet's Running could be seen at.
// - throughput: sustained Pods/s under --kube-api-qps 200 --kube-api-burst 400, with and without events, as a
//   ratio to the QPS bound. Baseline in the same run: the apiserver's own ceiling for the same number of
//   PUT pods/status from an unthrottled admin client at the same concurrency.
//
//   bun tests/bench/vk-sandbox-pods.bench.ts      prints the figures as JSON
import { cpus, tmpdir } from "node:os";
import type { V1Pod } from "@kubernetes/client-node";
import { auditEvents, sandboxPod, startE2eCluster, type E2eCluster } from "../e2e/vk-sandbox/cluster.ts";
import { waitFor } from "../support/wait.ts";
import { daemonCommand } from "../e2e/vk-sandbox/daemon.ts";
import { SANDBOXD_TOKEN, startStack, type Stack } from "../e2e/vk-sandbox/stack.ts";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { SandboxdClient } from "#shared/sandboxd/client.ts";
import { ClaimsFile } from "#services/vk-sandbox/claims/file.ts";
import { encodeTable } from "#services/vk-sandbox/claims/codec.ts";
import type { Claim } from "#services/vk-sandbox/claims/schema.ts";

export interface Figure {
  name: string;
  value: number;
  unit: string;
  command: string;
  cores: number;
  baseline: { name: string; value: number; unit: string };
  anchor?: string;
  notes?: string;
}

export const cores = cpus().length;

export function percentile(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]!;
}

const round = (x: number, d = 1) => Math.round(x * 10 ** d) / 10 ** d;

/**
 * A raw watch on one namespace's pods, calling `seen(type, pod)` for each event. When the apiserver ends the stream
 * (it closes watchers that read too slowly, which a busy bench process can be), it resumes from the last
 * resourceVersion seen, so no event is lost; an ERROR event (e.g. 410 Gone) is reported through `seen` and ends it.
 */
export async function watchPods(e2e: E2eCluster, ns: string, seen: (type: string, pod: V1Pod) => void): Promise<() => void> {
  const list = await e2e.kube.ok<{ metadata: { resourceVersion: string } }>("GET", `/api/v1/namespaces/${ns}/pods`);
  const abort = new AbortController();
  let rv = list.metadata.resourceVersion;
  const open = () =>
    e2e.cluster.adminFetch(`/api/v1/namespaces/${ns}/pods?watch=1&allowWatchBookmarks=true&resourceVersion=${rv}`, { signal: abort.signal });
  let r = await open();
  void (async () => {
    const dec = new TextDecoder();
    while (!abort.signal.aborted) {
      let buf = "";
      try {
        const reader = r.body!.getReader();
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += dec.decode(value, { stream: true });
          let nl;
          while ((nl = buf.indexOf("\n")) >= 0) {
            const line = buf.slice(0, nl);
            buf = buf.slice(nl + 1);
            if (!line) continue;
            const ev = JSON.parse(line) as { type: string; object: V1Pod };
            if (ev.type === "ERROR") {
              seen(ev.type, ev.object);
              return;
            }
            rv = ev.object.metadata?.resourceVersion ?? rv;
            if (ev.type !== "BOOKMARK") seen(ev.type, ev.object);
          }
        }
        if (abort.signal.aborted) return;
        r = await open();
      } catch {
        return; /* aborted */
      }
    }
  })();
  return () => abort.abort();
}

const wallNow = () => performance.timeOrigin + performance.now();

/** Wall-clock ms (sub-ms) of each pod's create call, its ADDED and its first Running, as the bench's watch saw them. */
type PodTimes = Map<string, { created: number; added?: number; running?: number }>;

/** Creates `n` pods at once in `ns` and returns per-pod ms from POST to ADDED and to Running, both via the watch. */
async function createAndTime(e2e: E2eCluster, ns: string, node: string, prefix: string, n: number, times: PodTimes = new Map()) {
  const added: number[] = [];
  const running: number[] = [];
  const stop = await watchPods(e2e, ns, (type, pod) => {
    const t = times.get(pod.metadata!.name!);
    if (t === undefined) return;
    const now = wallNow();
    if (type === "ADDED" && t.added === undefined) {
      t.added = now;
      added.push(now - t.created);
    }
    if (pod.status?.phase === "Running" && t.running === undefined) {
      t.running = now;
      running.push(now - t.created);
    }
  });
  const names = Array.from({ length: n }, (_, i) => `${prefix}-${i}`);
  await Promise.all(
    names.map(async (name) => {
      times.set(name, { created: wallNow() });
      await e2e.kube.createPod(sandboxPod(name, node, { ns }));
    }),
  );
  try {
    await waitFor(`${n} Running`, async () => running.length === n, 120_000, 20);
  } catch (e) {
    const live = (await e2e.kube.pods(ns)).filter((p) => names.includes(p.metadata!.name!));
    const phases = live.map((p) => `${p.metadata!.name}:${p.status?.phase ?? "-"}${times.get(p.metadata!.name!)?.running ? "(seen)" : ""}`);
    throw new Error(`${(e as Error).message}; the apiserver shows ${phases.filter((x) => !x.endsWith("(seen)")).slice(0, 10).join(", ")}`);
  } finally {
    stop();
  }
  return { added, running };
}

/**
 * Where one Pod's time goes, from timestamps taken outside the daemon: the bench's watch (create, ADDED, Running),
 * the simulator's request log (claim arrival, ms resolution) and the apiserver's audit log (the status PUT's
 * arrival and completion, µs). p50 of each hop over the pods given.
 */
function hopsOf(e2e: E2eCluster, stack: Stack, ns: string, times: PodTimes): string {
  const claims = new Map<string, number>();
  for (const r of stack.sim.requests) {
    const ref = (r.body as { claim_ref?: string } | undefined)?.claim_ref;
    if (r.route === "claim" && ref?.startsWith(`${ns}/`) && !claims.has(ref)) claims.set(ref, r.at);
  }
  const puts = new Map<string, { received: number; done: number }>();
  for (const e of auditEvents(e2e.auditPath)) {
    const m = new RegExp(`/namespaces/${ns}/pods/([^/]+)/status`).exec(e.requestURI);
    if (!m || e.verb !== "update" || puts.has(m[1]!)) continue;
    puts.set(m[1]!, { received: Date.parse(e.requestReceivedTimestamp) + subMs(e.requestReceivedTimestamp), done: Date.parse(e.stageTimestamp) + subMs(e.stageTimestamp) });
  }
  const hops: Record<string, number[]> = {
    "create→ADDED": [],
    "ADDED→claim at sandboxd": [],
    "claim→status PUT at apiserver (claim, durable write, status queue)": [],
    "status PUT in apiserver": [],
    "PUT done→Running seen": [],
  };
  for (const [name, t] of times) {
    const claim = claims.get(`${ns}/${name}`);
    const put = puts.get(name);
    if (t.added === undefined || t.running === undefined || claim === undefined || !put) continue;
    hops["create→ADDED"]!.push(t.added - t.created);
    hops["ADDED→claim at sandboxd"]!.push(claim - t.added);
    hops["claim→status PUT at apiserver (claim, durable write, status queue)"]!.push(put.received - claim);
    hops["status PUT in apiserver"]!.push(put.done - put.received);
    hops["PUT done→Running seen"]!.push(t.running - put.done);
  }
  return `hops p50 over ${hops["create→ADDED"]!.length} pods: ${Object.entries(hops)
    .map(([k, xs]) => `${k} ${round(percentile(xs, 50), 2)}`)
    .join(", ")} ms (claim arrival has ms resolution)`;
}

/** The microseconds RFC 3339 timestamps carry beyond Date.parse's milliseconds. */
function subMs(ts: string): number {
  const frac = /\.(\d+)Z$/.exec(ts)?.[1] ?? "";
  return frac.length > 3 ? Number(`0.${frac.slice(3)}`) : 0;
}

/**
 * Drops a group's leftover sandboxes from the shared simulator (its daemon was stopped, not drained), so the next
 * group's daemon does not spend its measurement on an orphan scan of another node's thousands of claims.
 */
export function forgetClaims(stack: Stack, ...namespaces: string[]): void {
  for (const c of stack.sim.claims()) if (namespaces.some((ns) => c.claimRef?.startsWith(`${ns}/`))) stack.sim.vanish(c.id);
}

export async function deleteAll(e2e: E2eCluster, ns: string): Promise<void> {
  await e2e.kube.req("DELETE", `/api/v1/namespaces/${ns}/pods`, { gracePeriodSeconds: 0 });
  await waitFor("pods gone", async () => (await e2e.kube.pods(ns)).length === 0, 120_000, 250);
}

/** Per-op latencies (ms) of `n` calls of `op(i)`, `concurrency` in flight, each worker idle `gapMs` between calls. */
async function timedOps(n: number, concurrency: number, op: (i: number) => Promise<unknown>, gapMs = 0): Promise<number[]> {
  const out: number[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < n) {
        const i = next++;
        const t = performance.now();
        await op(i);
        out.push(performance.now() - t);
        if (gapMs > 0) await Bun.sleep(gapMs);
      }
    }),
  );
  return out;
}

/**
 * A status update seen through a watch: pods bound to a node no daemon serves, each status PUT (Pending → Running,
 * what the daemon's push writes) timed from the PUT to the watch's MODIFIED, `n` at once. The PUT goes out as the
 * daemon's own ServiceAccount, so it pays what the daemon's does (token authentication, the audit log the bench
 * keeps of that identity).
 */
async function statusSeen(e2e: E2eCluster, ns: string, prefix: string, n: number): Promise<number[]> {
  // The identity of the node the pods are bound to: the node admission policy refuses any other node's status writes.
  const token = e2e.nodeToken("vk-bench-nobody");
  const asDaemon = (path: string, body: unknown) =>
    fetch(`${e2e.cluster.url}${path}`, {
      method: "PUT",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify(body),
      tls: { ca: e2e.cluster.caPem },
    }).then(async (r) => {
      if (!r.ok) throw new Error(`status PUT as the daemon answered ${r.status}: ${await r.text()}`);
    });
  const pods = await Promise.all(Array.from({ length: n }, (_, i) => e2e.kube.createPod(sandboxPod(`${prefix}-${i}`, "vk-bench-nobody", { ns }))));
  await Bun.sleep(200); // the creates' own watch events out of the way
  const sent = new Map<string, number>();
  const seen: number[] = [];
  const stop = await watchPods(e2e, ns, (type, pod) => {
    const t0 = sent.get(pod.metadata!.name!);
    if (type === "MODIFIED" && t0 !== undefined && pod.status?.phase === "Running") {
      seen.push(performance.now() - t0);
      sent.delete(pod.metadata!.name!);
    }
  });
  await Promise.all(
    pods.map(async (p) => {
      sent.set(p.metadata!.name!, performance.now());
      await asDaemon(`/api/v1/namespaces/${ns}/pods/${p.metadata!.name}/status`, {
        ...p,
        status: { ...p.status, phase: "Running", conditions: [{ type: "Ready", status: "True" }], startTime: new Date().toISOString() },
      });
    }),
  );
  await waitFor(`${n} status updates seen`, async () => seen.length === n, 60_000, 10);
  stop();
  return seen;
}

/** One durable claims-table write (tmp, fsync, rename, directory fsync) of a table of `rows` rows, `n` times. */
async function durableWrites(rows: number, n: number, gapMs = 0): Promise<number[]> {
  const dir = mkdtempSync(join(tmpdir(), "bench-floor-"));
  try {
    const file = new ClaimsFile({ path: join(dir, "claims.json") });
    const t0 = Date.now();
    const claims = new Map<string, Claim>();
    for (let i = 0; i < rows; i++) {
      const id = `sb_${i.toString(16).padStart(16, "0")}`;
      const uid = `6f1c2d3e-0000-4000-8000-${i.toString().padStart(12, "0")}`;
      claims.set(`lat/p${i}`, { id, token: "0123456789abcdef0123456789abcdef", address: "127.0.0.1:1", podUID: uid, authority: uid, claimedAt: t0, deadline: t0 + 86_400_000 });
    }
    const text = encodeTable({ claims, releasing: [] });
    return await timedOps(n, 1, () => file.write(text), gapMs);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** About how long the daemon sits idle between one Pod's Running and the next Pod's ADDED in the 1-Pod run. */
const IDLE_BETWEEN_PODS_MS = 15;

/**
 * The floor of "Pod bound → Running seen through a watch", measured in this run from its parts: the create seen
 * through a watch, a status update seen through a watch, a simulator claim, and one durable write. For one Pod at a
 * time it is the sum of the parts' p50s (and p99s); for 100 at once the sum of the parts' p99s with 100 in flight
 * (one group-committed write covers them all, so the write part is one write of the table they make).
 */
async function floorParts(e2e: E2eCluster, stack: Stack, createdSeen1: number[], createdSeen100: number[]) {
  await e2e.cluster.createNamespace("floor");
  const status1: number[] = [];
  for (let i = 0; i < 30; i++) status1.push(...(await statusSeen(e2e, "floor", `one${i}`, 1)));
  const status100 = [...(await statusSeen(e2e, "floor", "h0", 100)), ...(await statusSeen(e2e, "floor", "h1", 100))];
  await deleteAll(e2e, "floor");
  const sandboxd = new SandboxdClient({ baseUrl: stack.sim.url, token: SANDBOXD_TOKEN });
  const claimOp = (tag: string) => (i: number) => sandboxd.claim({ template: "base", claim_ref: `floor/${tag}-${i}` });
  await timedOps(10, 1, claimOp("warmup"));
  const claim1 = await timedOps(30, 1, claimOp("one"));
  const claim100 = [...(await timedOps(100, 100, claimOp("h0"))), ...(await timedOps(100, 100, claimOp("h1")))];
  forgetClaims(stack, "floor");
  const write1 = await durableWrites(30, 30);
  const write100 = await durableWrites(130, 30);
  // One Pod at a time, the daemon meets its claim and its write after being idle since the previous Pod, and a
  // process woken from idle on a busy machine waits for a core: at load ~8 a claim took 0.7-1.0 ms back to back and
  // 1.6-1.9 ms after 25 ms idle, whether the simulator ran in the caller's process or its own (docs/performance.md).
  // The floor keeps the back-to-back parts; these are reported beside it so the two can be told apart.
  const claim1Idle = await timedOps(30, 1, claimOp("idle"), IDLE_BETWEEN_PODS_MS);
  forgetClaims(stack, "floor");
  const write1Idle = await durableWrites(30, 30, IDLE_BETWEEN_PODS_MS);
  const sum = (p: number, parts: number[][]) => parts.reduce((a, xs) => a + percentile(xs, p), 0);
  const show = (p: number, parts: Record<string, number[]>) =>
    Object.entries(parts)
      .map(([k, xs]) => `${k} ${round(percentile(xs, p), 2)}`)
      .join(" + ");
  const one = { "create seen": createdSeen1, "status seen": status1, claim: claim1, write: write1 };
  const hundred = { "create seen": createdSeen100, "status seen": status100, claim: claim100, write: write100 };
  return {
    p50: sum(50, Object.values(one)),
    p99: sum(99, Object.values(one)),
    p50of100: sum(50, Object.values(hundred)),
    p99of100: sum(99, Object.values(hundred)),
    explain: (p: number, many: boolean) => `floor = ${show(p, many ? hundred : one)} ms`,
    /** The 1-Pod claim and write parts timed after IDLE_BETWEEN_PODS_MS idle, and the floor they would make. */
    idle: (p: number) => ({
      claim: percentile(claim1Idle, p),
      write: percentile(write1Idle, p),
      floor: sum(p, [createdSeen1, status1, claim1Idle, write1Idle]),
    }),
  };
}

export async function latencyFigures(e2e: E2eCluster, stack: Stack): Promise<Figure[]> {
  await e2e.cluster.createNamespace("lat");
  const d = stack.daemon({ node: "vk-bench-lat", env: { VK_LOG_LEVEL: "info" }, direct: true });
  const single = { added: [] as number[], running: [] as number[] };
  const singleTimes: PodTimes = new Map();
  const hundred = { added: [] as number[], running: [] as number[] };
  try {
    await d.waitForLog(/vk-sandbox ready/, 60_000);
    for (let i = 0; i < 30; i++) {
      const r = await createAndTime(e2e, "lat", "vk-bench-lat", `one${i}`, 1, singleTimes);
      single.added.push(...r.added);
      single.running.push(...r.running);
    }
    for (let round_ = 0; round_ < 2; round_++) {
      const r = await createAndTime(e2e, "lat", "vk-bench-lat", `hundred${round_}`, 100);
      hundred.added.push(...r.added);
      hundred.running.push(...r.running);
    }
  } finally {
    // A failed group must not leave its daemon running into the next group's measurement.
    await d.kill("SIGTERM");
  }
  const hops = hopsOf(e2e, stack, "lat", singleTimes);
  await deleteAll(e2e, "lat");
  forgetClaims(stack, "lat");
  const floor = await floorParts(e2e, stack, single.added, hundred.added);
  const cmd = "bun run bench -- latency (tests/bench/vk-sandbox-pods.bench.ts latencyFigures)";
  const anchor = "issue 13: 1 Pod within 2 ms p50 of the floor; 100 at once within 2× its p99. Real fleet: 100 Sandbox create→Ready p50 < 1 s, p99 1 s (anchors A.1)";
  const fig = (name: string, xs: number[], p: number, base: number, many: boolean, notes: string): Figure => ({
    name,
    value: round(percentile(xs, p)),
    unit: "ms",
    command: cmd,
    cores,
    baseline: { name: `floor p${p}: create seen + status update seen (both via a watch) + simulator claim + one durable write`, value: round(base), unit: "ms" },
    anchor,
    notes: `${notes}; ${round(percentile(xs, p) - base)} ms above the floor; ${floor.explain(p, many)}`,
  });
  return [
    fig("pod bound → Running via watch, 1 pod, p50", single.running, 50, floor.p50, false, `30 sequential pods; ${hops}; ${idleNote(floor.idle(50), percentile(single.running, 50))}`),
    {
      // The same Pods against the floor met as a lone Pod meets it: its claim and write timed after the idle gap the
      // 1-Pod run leaves between Pods. The row above keeps the back-to-back floor, so runs stay comparable.
      ...fig("pod bound → Running via watch, 1 pod, p50, against the floor with claim and write after idle", single.running, 50, floor.idle(50).floor, false, "30 sequential pods (the same as the first row)"),
      baseline: {
        name: `floor p50 with its claim and write timed after ${IDLE_BETWEEN_PODS_MS} ms idle: create seen + status update seen (both via a watch) + simulator claim + one durable write`,
        value: round(floor.idle(50).floor),
        unit: "ms",
      },
      notes: `30 sequential pods (the same as the first row); ${round(percentile(single.running, 50) - floor.idle(50).floor)} ms above this floor; ${idleNote(floor.idle(50), percentile(single.running, 50))}`,
    },
    fig("pod bound → Running via watch, 1 pod, p99", single.running, 99, floor.p99, false, "30 sequential pods"),
    fig("pod bound → Running via watch, 100 at once, p50", hundred.running, 50, floor.p50of100, true, "2 rounds of 100, default qps 200/burst 400"),
    fig("pod bound → Running via watch, 100 at once, p99", hundred.running, 99, floor.p99of100, true, "2 rounds of 100, default qps 200/burst 400"),
  ];
}

/** The floor's claim and write timed after idle, as one Pod at a time meets them (floorParts). */
function idleNote(idle: { claim: number; write: number; floor: number }, value: number): string {
  return `claim and write timed after ${IDLE_BETWEEN_PODS_MS} ms idle as a lone Pod meets them: claim ${round(idle.claim, 2)} + write ${round(idle.write, 2)} ms, a floor of ${round(idle.floor)} ms (${round(value - idle.floor)} ms above it)`;
}

const QPS = 200;
const BURST = 400;

const CLK_TCK = Number(Bun.spawnSync(["getconf", "CLK_TCK"]).stdout.toString().trim()) || 100;

/** CPU time (user + system) a process has used, in ms, from /proc/<pid>/stat (fields 14 and 15). */
export function processCpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  // The command name (field 2) is in parentheses and may hold spaces: count fields after its closing one.
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return ((Number(f[11]) + Number(f[12])) * 1000) / CLK_TCK;
}

/** The machine's busy and total CPU time in ms across every core, from /proc/stat (busy = all but idle and iowait). */
export function machineCpuMs(): { busy: number; total: number } {
  const f = readFileSync("/proc/stat", "utf8").split("\n", 1)[0]!.trim().split(/\s+/).slice(1, 9).map(Number);
  const total = f.reduce((a, b) => a + b, 0);
  return { busy: ((total - f[3]! - f[4]!) * 1000) / CLK_TCK, total: (total * 1000) / CLK_TCK };
}

interface CpuSample {
  daemon: number;
  apiserver: number;
  bench: number;
  machine: { busy: number; total: number };
}

function cpuSample(daemonPid: number, apiserverPid: number): CpuSample {
  const u = process.cpuUsage();
  return { daemon: processCpuMs(daemonPid), apiserver: processCpuMs(apiserverPid), bench: (u.user + u.system) / 1000, machine: machineCpuMs() };
}

interface ThroughputRun {
  n: number;
  /** Pods/s from the first Running to the last, seen through a watch. */
  sustained: number;
  windowSeconds: number;
  /** The daemon's requests the apiserver received inside that window (its audit log), by verb and resource. */
  requests: number;
  byKind: Record<string, number>;
  /** Requests per second in the window, and the most a qps/burst bucket allows over it. */
  requestRate: number;
  allowedRate: number;
  overall: number;
  /**
   * CPU ms per Pod in the window (first Running to last) of the daemon, the kube-apiserver (etcd embedded) and the
   * bench process (its watch, the creates' clients and the sandboxd simulator), and how many of the machine's cores
   * were busy on average (everything on the machine, other helpers' work too).
   */
  cpu: { daemonMsPerPod: number; apiserverMsPerPod: number; benchMsPerPod: number; busyCores: number };
  /** The daemon's claims-table writes over the whole run (its /metrics): each rewrites the whole table. */
  stateWrites: { writes: number; seconds: number; bytes: number };
}

/** The claims-table write count, total seconds and bytes from the daemon's /metrics on its kubelet port. */
async function claimsTableWrites(port: number): Promise<{ writes: number; seconds: number; bytes: number }> {
  const text = await (await fetch(`https://127.0.0.1:${port}/metrics`, { tls: { rejectUnauthorized: false } })).text();
  const read = (re: RegExp) => Number(re.exec(text)?.[1] ?? NaN);
  return {
    writes: read(/^vk_sandbox_state_write_seconds_count\{outcome="ok"\} (\S+)$/m),
    seconds: read(/^vk_sandbox_state_write_seconds_sum\{outcome="ok"\} (\S+)$/m),
    bytes: read(/^vk_sandbox_state_write_bytes_total (\S+)$/m),
  };
}

/**
 * Sustained pods/s for `n` pods under --kube-api-qps 200 --kube-api-burst 400. The pods are created (bound to the
 * node) before the daemon starts, so the bench's own create rate is not what is measured; the daemon finds them all
 * in its first LIST. The window runs from the first Pod seen Running to the last. A token bucket admits at most
 * burst + qps × T requests in any window of T seconds and every Pod costs at least one request (its status PUT),
 * so the burst's share of the Pods in the window is at most 400 / n: with n = 10,000 it is under 4%, whatever the
 * rate (the issue's "a window where the burst adds under 5%").
 */
export async function throughputRun(e2e: E2eCluster, stack: Stack, ns: string, n: number, events: boolean): Promise<ThroughputRun> {
  await e2e.cluster.createNamespace(ns);
  const node = `vk-bench-${ns}`;
  const names = Array.from({ length: n }, (_, i) => `t${i}`);
  // 64 creates in flight, a pool rather than batches (a batch waits for its slowest create).
  await timedOps(n, 64, (i) => e2e.kube.createPod(sandboxPod(names[i]!, node, { ns })));
  const times: number[] = [];
  const seen = new Set<string>();
  // CPU counters read at the window's edges: as the first and the last Pod are seen Running.
  let daemonPid = 0;
  let cpuFirst: CpuSample | undefined;
  let cpuLast: CpuSample | undefined;
  const stop = await watchPods(e2e, ns, (_t, pod) => {
    if (pod.status?.phase === "Running" && !seen.has(pod.metadata!.name!)) {
      seen.add(pod.metadata!.name!);
      times.push(performance.now());
      if (times.length === 1) cpuFirst = cpuSample(daemonPid, e2e.cluster.pid);
      if (times.length === n) cpuLast = cpuSample(daemonPid, e2e.cluster.pid);
    }
  });
  const t0 = performance.now();
  // Wall-clock edges of the window for the audit log, which stamps requests in wall time.
  let wallFirst = 0;
  let wallLast = 0;
  const d = stack.daemon({
    node,
    direct: true,
    env: { VK_LOG_LEVEL: "info" },
    extra: [`--kube-api-qps=${QPS}`, `--kube-api-burst=${BURST}`, `--node-pods=${n + 100}`, ...(events ? [] : ["--disable-pod-events"])],
  });
  daemonPid = d.proc.pid;
  let stateWrites: ThroughputRun["stateWrites"] = { writes: 0, seconds: 0, bytes: 0 };
  try {
    await waitFor("the first pod Running", async () => {
      if (times.length > 0 && !wallFirst) wallFirst = Date.now() - (performance.now() - times[0]!);
      return times.length > 0;
    }, 180_000, 5);
    await waitFor(`${n} Running`, async () => times.length === n, 600_000, 20);
    wallLast = Date.now() - (performance.now() - times[n - 1]!);
    stateWrites = await claimsTableWrites(d.port);
  } finally {
    stop();
    await d.kill("SIGTERM");
  }
  const windowSeconds = (times[n - 1]! - times[0]!) / 1000;
  const inWindow = auditEvents(e2e.auditPath).filter((e) => {
    const t = Date.parse(e.requestReceivedTimestamp);
    return t >= wallFirst && t <= wallLast && e.verb !== "watch" && e.requestURI.includes(`/namespaces/${ns}/`);
  });
  const byKind: Record<string, number> = {};
  for (const e of inWindow) {
    const resource = /\/namespaces\/[^/]+\/([a-z]+)(?:\/[^/?]+)?(\/status)?/.exec(e.requestURI);
    const k = `${e.verb} ${resource ? `${resource[1]}${resource[2] ?? ""}` : e.requestURI}`;
    byKind[k] = (byKind[k] ?? 0) + 1;
  }
  return {
    n,
    sustained: (n - 1) / windowSeconds,
    windowSeconds,
    requests: inWindow.length,
    byKind,
    requestRate: inWindow.length / windowSeconds,
    allowedRate: QPS + BURST / windowSeconds,
    overall: n / ((times[n - 1]! - t0) / 1000),
    stateWrites,
    cpu: {
      daemonMsPerPod: (cpuLast!.daemon - cpuFirst!.daemon) / (n - 1),
      apiserverMsPerPod: (cpuLast!.apiserver - cpuFirst!.apiserver) / (n - 1),
      benchMsPerPod: (cpuLast!.bench - cpuFirst!.bench) / (n - 1),
      busyCores: (cores * (cpuLast!.machine.busy - cpuFirst!.machine.busy)) / (cpuLast!.machine.total - cpuFirst!.machine.total),
    },
  };
}

/** The apiserver's ceiling for `n` status PUTs at concurrency 32 from an unthrottled admin client. */
async function statusPutCeiling(e2e: E2eCluster, ns: string, limit = 3000): Promise<number> {
  const pods = (await e2e.kube.pods(ns)).slice(0, limit);
  const t0 = performance.now();
  for (let i = 0; i < pods.length; i += 32) {
    await Promise.all(
      pods.slice(i, i + 32).map((p) =>
        e2e.kube.ok("PUT", `/api/v1/namespaces/${ns}/pods/${p.metadata!.name}/status`, {
          ...p,
          status: { ...p.status, message: "baseline write" },
        }),
      ),
    );
  }
  return pods.length / ((performance.now() - t0) / 1000);
}

export async function throughputFigures(e2e: E2eCluster, stack: Stack, n = 10_000): Promise<Figure[]> {
  const noEvents = await throughputRun(e2e, stack, "tput-noev", n, false);
  const ceiling = await statusPutCeiling(e2e, "tput-noev");
  await deleteAll(e2e, "tput-noev");
  forgetClaims(stack, "tput-noev");
  const withEvents = await throughputRun(e2e, stack, "tput-ev", n, true);
  await deleteAll(e2e, "tput-ev");
  forgetClaims(stack, "tput-ev");
  const cmd = `bun run bench -- throughput (tests/bench/vk-sandbox-pods.bench.ts throughputFigures, ${n} pods, --kube-api-qps ${QPS} --kube-api-burst ${BURST})`;
  const fig = (name: string, r: ThroughputRun, notes: string): Figure => ({
    name,
    value: round(r.sustained / QPS, 3),
    unit: `× QPS bound (${QPS}/s)`,
    command: cmd,
    cores,
    baseline: { name: "apiserver ceiling: unthrottled admin PUT pods/status, concurrency 32, same pods", value: round(ceiling / QPS, 3), unit: `× ${QPS}/s` },
    anchor: "issue 13: ratio to the bound over a window where the burst adds < 5%. Client throttling: 2000 pods at client-go's 5 qps ~400 s (anchors A.3)",
    notes:
      `${round(r.sustained)} pods/s from the first pod Running to the last (${round(r.windowSeconds, 1)} s, ${r.n} pods; the burst can add at most ${round((BURST / r.n) * 100, 1)}% of them); ` +
      `the daemon sent ${r.requests} requests in the window (audit log: ${Object.entries(r.byKind).map(([k, v]) => `${k} ${v}`).join(", ")}), ` +
      `${round(r.requestRate)} req/s = ${round(r.requestRate / QPS, 3)} × qps (a bucket allows ${round(r.allowedRate)}/s over this window), ${round(r.requests / r.n, 2)} requests per pod; ` +
      `overall ${round(r.overall)} pods/s from process start; ${notes}`,
  });
  const cpuFig = (name: string, r: ThroughputRun): Figure => ({
    name,
    value: round(r.cpu.daemonMsPerPod, 2),
    unit: "CPU ms per pod",
    command: cmd,
    cores,
    baseline: { name: "kube-apiserver (etcd embedded) CPU per pod in the same window", value: round(r.cpu.apiserverMsPerPod, 2), unit: "CPU ms per pod" },
    anchor: "issue 13: is the sustained rate CPU-bound? utime+stime from /proc/<pid>/stat over the throughput window ÷ pods",
    notes:
      `${round(r.sustained)} pods/s; per pod: daemon ${round(r.cpu.daemonMsPerPod, 2)} ms, kube-apiserver ${round(r.cpu.apiserverMsPerPod, 2)} ms, ` +
      `bench process (watch + sandboxd simulator) ${round(r.cpu.benchMsPerPod, 2)} ms; ` +
      `at this rate they need ${round(((r.cpu.daemonMsPerPod + r.cpu.apiserverMsPerPod + r.cpu.benchMsPerPod) * r.sustained) / 1000, 2)} of ${cores} cores; ` +
      `the machine's cores were ${round(r.cpu.busyCores, 2)} of ${cores} busy on average (other work on the machine included); ` +
      `claims-table writes over the run: ${round(r.stateWrites.writes / r.n, 2)} per pod, ${round(r.stateWrites.bytes / r.stateWrites.writes / 1024)} KiB and ` +
      `${round((1000 * r.stateWrites.seconds) / r.stateWrites.writes, 2)} ms each on average`,
  });
  return [
    cpuFig("vk-sandbox CPU per pod in the throughput window, without events", noEvents),
    cpuFig("vk-sandbox CPU per pod in the throughput window, with events", withEvents),
    fig("sustained pods/s with events, ratio to QPS", withEvents, "with events each pod costs a status PUT and a Normal event write, so the pod bound is qps ÷ (requests per pod)"),
    fig("sustained pods/s without events, ratio to QPS", noEvents, "each pod costs ≥ 1 request (status PUT), so 1.0 is the bound"),
  ];
}

if (import.meta.main) {
  const e2e = await startE2eCluster();
  const stack = await startStack(e2e, { pools: ["base=4500"] });
  try {
    console.log(JSON.stringify({ daemon: daemonCommand(), figures: [...(await latencyFigures(e2e, stack)), ...(await throughputFigures(e2e, stack))] }, null, 2));
  } finally {
    await stack.stop();
    await e2e.stop();
  }
}
