// `bun run bench`: runs every benchmark and writes tests/bench/results.json and tests/bench/RESULTS.md. Every
// figure carries the command that made it, the machine's core count, and a baseline measured in the same run.
// The vk-sandbox benches share one real kube-apiserver and one sandboxd simulator; the daemon runs as its own
// process (dist/vk-sandbox when it is newer than its sources, else from source).
//
//   bun run bench                  everything
//   bun run bench -- claims        only benches whose group name contains "claims" (groups: claims, idle, latency,
//                                  throughput, e2b, stack, apiserver); the other groups' figures are kept from the previous results
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { cpus } from "node:os";
import { join } from "node:path";
import { startE2eCluster } from "../e2e/vk-sandbox/cluster.ts";
import { daemonCommand } from "../e2e/vk-sandbox/daemon.ts";
import { startStack } from "../e2e/vk-sandbox/stack.ts";
import { runClaimsTableBench } from "./claims-table.bench.ts";
import { apiserverFigures } from "./sandbox-apiserver.bench.ts";
import { e2bRelayFigures } from "./e2b-relay.bench.ts";
import { stackFigures } from "./stack.bench.ts";
import { idleFigures } from "./vk-sandbox-idle.bench.ts";
import { latencyFigures, throughputFigures, type Figure } from "./vk-sandbox-pods.bench.ts";

const dir = import.meta.dir;
const only = process.argv.slice(2).filter((a) => !a.startsWith("-"));
const wanted = (group: string) => only.length === 0 || only.some((o) => group.includes(o));
const figures: Array<Figure & { group: string }> = [];
const started = new Date();

if (wanted("claims")) {
  const r = await runClaimsTableBench();
  for (const rows of [...new Set(r.cases.map((c) => c.rows))]) {
    const g = r.cases.find((c) => c.rows === rows && c.mode === "group-commit")!;
    const b = r.cases.find((c) => c.rows === rows && c.mode === "baseline-write-per-claim")!;
    const common = { group: "claims", command: r.command, cores: r.cores, anchor: "Go BenchmarkCommitClaim: whole table under one mutex per claim; save at 1000 claims 1.41 ms → ~300 µs (anchors A.3)" };
    figures.push({
      ...common,
      name: `durable claims/s at ${rows} rows, ${g.concurrency} concurrent creates`,
      value: Math.round(g.claimsPerSecond),
      unit: "claims/s",
      baseline: { name: "one whole-table write per claim", value: Math.round(b.claimsPerSecond), unit: "claims/s" },
      notes: `${g.claimsPerWrite.toFixed(1)} claims per write; fsync ${r.fsync ? "on" : "off"}`,
    });
    figures.push({
      ...common,
      name: `bytes written per claim at ${rows} rows`,
      value: Math.round(g.bytesPerClaim),
      unit: "B/claim",
      baseline: { name: "one whole-table write per claim", value: Math.round(b.bytesPerClaim), unit: "B/claim" },
      notes: `table ${g.tableBytes} B`,
    });
  }
}

if (wanted("idle") || wanted("latency") || wanted("throughput")) {
  const e2e = await startE2eCluster();
  const stack = await startStack(e2e, { pools: ["base=4500"] });
  try {
    // Quietest first: the idle figure must not see another bench's leftovers being processed.
    if (wanted("idle")) for (const f of await idleFigures(e2e, stack)) figures.push({ ...f, group: "idle" });
    if (wanted("latency")) for (const f of await latencyFigures(e2e, stack)) figures.push({ ...f, group: "latency" });
    if (wanted("throughput")) for (const f of await throughputFigures(e2e, stack)) figures.push({ ...f, group: "throughput" });
  } finally {
    await stack.stop();
    await e2e.stop();
  }
}

if (wanted("e2b")) for (const f of await e2bRelayFigures()) figures.push({ ...f, group: "e2b" });
if (wanted("stack")) for (const f of await stackFigures()) figures.push({ ...f, group: "stack" });

if (wanted("apiserver")) for (const f of await apiserverFigures()) figures.push({ ...f, group: "apiserver" });

// A filtered run replaces only its own groups: figures of groups it did not run stay as the last full run left them.
const resultsPath = join(dir, "results.json");
if (only.length > 0 && existsSync(resultsPath)) {
  const previous = JSON.parse(readFileSync(resultsPath, "utf8")) as { figures?: Array<Figure & { group: string }> };
  const kept = (previous.figures ?? []).filter((f) => !wanted(f.group));
  figures.unshift(...kept);
}

const result = {
  startedAt: started.toISOString(),
  finishedAt: new Date().toISOString(),
  cores: cpus().length,
  cpu: cpus()[0]?.model,
  bun: Bun.version,
  daemon: daemonCommand().join(" "),
  figures,
};
writeFileSync(resultsPath, `${JSON.stringify(result, null, 2)}\n`);

const cell = (s: string | number | undefined) => String(s ?? "").replace(/\|/g, "\\|");
const md = [
  "# Benchmark results",
  "",
  `Run ${result.startedAt} → ${result.finishedAt} on ${result.cores} cores (${cell(result.cpu)}), Bun ${result.bun}.`,
  `vk-sandbox ran as \`${result.daemon.replace(/^.*\/(bun[^ ]*|vk-sandbox)/, "$1")}\`. Regenerate with \`bun run bench\`.`,
  "Each baseline was measured in the same run; anchors are published figures (quoted with their source in the column), most of",
  "them from real fleets, so they are context rather than targets on this machine.",
  "",
  "| Figure | Value | Baseline (same run) | Anchor | Command | Cores | Notes |",
  "|---|---:|---|---|---|---:|---|",
  ...figures.map(
    (f) =>
      `| ${cell(f.name)} | ${cell(f.value)} ${cell(f.unit)} | ${cell(f.baseline.value)} ${cell(f.baseline.unit)} (${cell(f.baseline.name)}) | ${cell(f.anchor)} | \`${cell(f.command)}\` | ${f.cores} | ${cell(f.notes)} |`,
  ),
  "",
];
writeFileSync(join(dir, "RESULTS.md"), md.join("\n"));
console.log(md.join("\n"));
