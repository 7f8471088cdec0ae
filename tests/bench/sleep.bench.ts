// Issue 28's figures ("Tests and figures"): on the mesh stack (sandbox-e2b with its in-process envd proxy, simulated
// nodes with guest agents), with the stock JS SDK:
//   - first-request latency on a sleeping sandbox against a running one, p50 and p99, interleaved in the same run:
//     the sandbox is put to sleep the way its node does it (its pool's idle time passes on the node's clock), the
//     proxy's fleet view is waited for, then one files.read is timed; the next files.read (awake) is the baseline;
//   - node wakes under 20 concurrent first requests to one sleeping sandbox (the goal: exactly one);
//   - the memory a sleeping sandbox frees in the simulator (its report, services/sandboxd-sim/docs/sleep.md).
// The simulator's wake is instant (no memory image to read back): the latency figure is the control plane's part of a
// wake (fleet view, proxy, node relay, guest thaw), not sandboxd's restore time.
import { Sandbox } from "e2b";
import { startStack } from "../integration/e2b/harness.ts";
import { sdkOpts } from "../integration/e2b/harness.ts";
import { until } from "../support/wait.ts";
import { cores, percentile, type Figure } from "./vk-sandbox-pods.bench.ts";

const COMMAND = "bun run bench -- sleep (tests/bench/sleep.bench.ts)";
const IDLE_S = 600;
const SAMPLES = 30;
const round = (x: number, d = 2) => Math.round(x * 10 ** d) / 10 ** d;

export async function sleepFigures(): Promise<Figure[]> {
  const s = await startStack({ proxy: true, guestAgents: true, pools: [`img:1/none/small=3,idle=${IDLE_S}`] });
  try {
    const claimOf = (id: string) => s.cluster.nodes.flatMap((n) => n.claims()).find((c) => c.id === id.replace(/^sb-/, "sb_"));
    const nodeOf = (id: string) => s.cluster.nodes.find((n) => n.claims().some((c) => c.id === id.replace(/^sb-/, "sb_")))!;
    const listedPaused = async (id: string) => {
      const p = Sandbox.list({ ...sdkOpts(s), query: { state: ["paused"] } });
      while (p.hasNext) if ((await p.nextItems()).some((x) => x.sandboxId === id)) return true;
      return false;
    };
    /** The node's idle time passes for a sandbox nobody holds open; then the fleet view (the proxy's) shows it. */
    const sleep = async (id: string) => {
      await until(() => (claimOf(id)?.holds ?? 0) === 0, "every connection closed", 10_000, 5);
      s.cluster.clock.advance(IDLE_S * 1000 + 1000);
      nodeOf(id).idleNow();
      if (claimOf(id)?.state !== "hibernated") throw new Error(`sandbox ${id} did not fall asleep`);
      await until(() => listedPaused(id), "the fleet view to show it asleep", 10_000, 20);
    };

    const sbx = await Sandbox.create("base", { ...sdkOpts(s), timeoutMs: 86_400_000 });
    const file = `/tmp/bench-${sbx.sandboxId}`;
    await sbx.files.write(file, "x");
    for (let i = 0; i < 5; i++) await sbx.files.read(file); // warm-up

    // Memory: what the node reports its sandbox holds awake, then asleep.
    const mem = () => nodeOf(sbx.sandboxId).memory().sandboxes.find((x) => x.id === claimOf(sbx.sandboxId)!.id)!;
    const awakeBytes = mem().mem_used_bytes;
    const total = mem().mem_total_bytes;

    const asleep: number[] = [];
    const awake: number[] = [];
    let freed = 0;
    for (let i = 0; i < SAMPLES; i++) {
      await sleep(sbx.sandboxId);
      if (i === 0) freed = awakeBytes - mem().mem_used_bytes;
      let t0 = performance.now();
      await sbx.files.read(file);
      asleep.push(performance.now() - t0);
      t0 = performance.now();
      await sbx.files.read(file);
      awake.push(performance.now() - t0);
    }

    // 20 concurrent first requests: how many wakes the node does.
    await sleep(sbx.sandboxId);
    const node = nodeOf(sbx.sandboxId);
    const wakesBefore = node.node.counters.get("wakes_total") ?? 0;
    const burst: number[] = [];
    await Promise.all(
      Array.from({ length: 20 }, async () => {
        const t0 = performance.now();
        await sbx.files.read(file);
        burst.push(performance.now() - t0);
      }),
    );
    const wakes = (node.node.counters.get("wakes_total") ?? 0) - wakesBefore;
    await sbx.kill();

    const p = (xs: number[], q: number) => round(percentile(xs, q));
    const base = { command: COMMAND, cores };
    return [
      {
        ...base,
        name: "first request to a sleeping sandbox (files.read through the envd proxy), p50",
        value: p(asleep, 50),
        unit: "ms",
        baseline: { name: "the same call to the same sandbox awake, same run, p50", value: p(awake, 50), unit: "ms" },
        anchor: "issue 28: the first request after sleep wakes it once and is served",
        notes: `${SAMPLES} interleaved pairs; asleep = its pool's idle time passed on the node's clock and the proxy's fleet view shows it Hibernated; the simulator's wake is instant, so this is the control plane's part (view, proxy, relay, guest thaw), not sandboxd's memory restore`,
      },
      {
        ...base,
        name: "first request to a sleeping sandbox (files.read through the envd proxy), p99",
        value: p(asleep, 99),
        unit: "ms",
        baseline: { name: "the same call to the same sandbox awake, same run, p99", value: p(awake, 99), unit: "ms" },
        anchor: "issue 28",
        notes: `${SAMPLES} interleaved pairs (p99 of 30 is the largest)`,
      },
      {
        ...base,
        name: "node wakes for 20 concurrent first requests to one sleeping sandbox",
        value: wakes,
        unit: "wakes",
        baseline: { name: "the goal: exactly one wake", value: 1, unit: "wakes" },
        anchor: "issue 28 item 5: one wake per sandbox however many requests arrive",
        notes: `all 20 served; their latency p50 ${p(burst, 50)} ms, p99 ${p(burst, 99)} ms (sandboxd_wakes_total on the node)`,
      },
      {
        ...base,
        name: "memory a sleeping sandbox frees in the simulator (small tier)",
        value: round(freed / 2 ** 20, 1),
        unit: "MiB",
        baseline: { name: "the sandbox's allocation (mem_total_bytes)", value: round(total / 2 ** 20, 1), unit: "MiB" },
        anchor: "sandboxd: hibernation writes the VM's memory out and frees it",
        notes: "the simulator's memory report (stats mem_used_bytes, memory()): modelled as a quarter of the allocation while running, 0 asleep; not a measurement of a VM",
      },
    ];
  } finally {
    await s.stop();
  }
}

if (import.meta.main) console.log(JSON.stringify(await sleepFigures(), null, 2));
