// The benchmark history: one file per run in tests/bench/results/ (<UTC start>.json and the same table as .md), and
// tests/bench/RESULTS.md = the newest run's table followed by the list of every run. Runs are never rewritten.
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Figure } from "./vk-sandbox-pods.bench.ts";

export const BENCH_DIR = import.meta.dir;
export const RESULTS_DIR = join(BENCH_DIR, "results");

export interface RunFigure extends Figure {
  group: string;
  /** 1-minute load average when the group started and ended (the machine is shared; read figures against it). */
  load?: { before: number; after: number };
  groupSeconds?: number;
  /** Set when a filtered run carried this figure forward: the run file it was measured in. */
  from?: string;
}

export interface BenchRun {
  startedAt: string;
  finishedAt: string;
  command: string;
  groups: string[] | "all";
  revision: string;
  cores: number;
  cpu?: string;
  bun: string;
  daemon: string;
  /** `uptime` output before the first and after the last group. */
  uptime: { before: string; after: string };
  figures: RunFigure[];
  /** Groups that failed in this run (their figures are missing from it). */
  errors?: Array<{ group: string; message: string }>;
}

/** results/2026-12-01T02-45-10Z: sortable, no colons (portable file names). */
export function runName(startedAt: string): string {
  return startedAt.replace(/\.\d+Z$/, "Z").replace(/:/g, "-");
}

function runFiles(): string[] {
  if (!existsSync(RESULTS_DIR)) return [];
  return readdirSync(RESULTS_DIR)
    // Only `bun run bench` runs (<UTC start>.json): other benches keep their own files here (warmpool-ramp-*.json).
    .filter((f) => /^\d{4}-\d\d-\d\dT\d\d-\d\d-\d\dZ\.json$/.test(f))
    .sort();
}

export function latestRun(): { file: string; run: BenchRun } | undefined {
  const file = runFiles().at(-1);
  if (!file) return undefined;
  return { file, run: JSON.parse(readFileSync(join(RESULTS_DIR, file), "utf8")) as BenchRun };
}

const cell = (s: string | number | undefined) => String(s ?? "").replace(/\|/g, "\\|").replace(/\n/g, " ");

/** value ÷ baseline, the figure every row is read by (2 significant decimals; blank when the baseline is 0). */
export function ratioOf(f: Figure): string {
  if (!f.baseline.value || !Number.isFinite(f.value)) return "";
  const r = f.value / f.baseline.value;
  return `${r >= 10 ? r.toFixed(1) : r.toFixed(2)}×`;
}

export function runTable(run: BenchRun): string[] {
  const failed = (run.errors ?? []).map((e) => `**Group ${e.group} failed** in this run: \`${e.message.split("\n")[0]}\``);
  return [
    ...(failed.length ? [...failed, ""] : []),
    `Run ${run.startedAt} → ${run.finishedAt} on ${run.cores} cores (${cell(run.cpu)}), Bun ${run.bun}, revision ${run.revision}.`,
    `Command \`${run.command}\`; vk-sandbox ran as \`${run.daemon.replace(/^.*\/(bun[^ ]*|vk-sandbox)/, "$1")}\`.`,
    `Load: \`${run.uptime.before}\` before, \`${run.uptime.after}\` after (other work shares the machine; the Load column`,
    "is the 1-minute load average when each figure's group started → ended).",
    "",
    "| Figure | Value | Baseline (same run) | Value ÷ baseline | Goal / anchor | Command | Cores | Load | Notes |",
    "|---|---:|---|---:|---|---|---:|---|---|",
    ...run.figures.map(
      (f) =>
        `| ${cell(f.name)} | ${cell(f.value)} ${cell(f.unit)} | ${cell(f.baseline.value)} ${cell(f.baseline.unit)} (${cell(f.baseline.name)}) | ${ratioOf(f)} | ${cell(f.anchor)} | \`${cell(f.command)}\` | ${f.cores} | ${f.load ? `${f.load.before} → ${f.load.after}` : ""} | ${f.from ? `(from ${f.from}) ` : ""}${cell(f.notes)} |`,
    ),
  ];
}

/** Writes results/<name>.json and .md, then RESULTS.md (newest table + history). Returns the table and file. */
export function writeRun(run: BenchRun): { md: string; file: string } {
  const name = runName(run.startedAt);
  const file = join(RESULTS_DIR, `${name}.json`);
  writeFileSync(file, `${JSON.stringify(run, null, 2)}\n`);
  const table = runTable(run);
  writeFileSync(join(RESULTS_DIR, `${name}.md`), ["# Benchmark run " + run.startedAt, "", ...table, ""].join("\n"));
  const newest = latestRun()!;
  const history = runFiles()
    .reverse()
    .map((f) => {
      const r = JSON.parse(readFileSync(join(RESULTS_DIR, f), "utf8")) as BenchRun;
      const groups = r.groups === "all" ? "all groups" : `groups ${r.groups.join(", ")} (others carried forward)`;
      return `- [${f.replace(/\.json$/, "")}](results/${f.replace(/\.json$/, ".md")}): ${groups}, revision ${r.revision ?? "?"}, load \`${(r.uptime?.before ?? "").replace(/^.*load average: /, "")}\``;
    });
  const md = [
    "# Benchmark results",
    "",
    "Regenerate with `bun run bench` (every group, about 10 minutes on 2 cores) or `bun run bench -- <group>`.",
    "Each baseline was measured in the same run; anchors are published figures (quoted with their source), most of them",
    "from real fleets, so they are context rather than targets on this machine. Goals are the issues' own.",
    "",
    "## Newest run",
    "",
    ...runTable(newest.run),
    "",
    "## History (newest first; every run's JSON and table stay in results/)",
    "",
    ...history,
    "",
  ].join("\n");
  writeFileSync(join(BENCH_DIR, "RESULTS.md"), md);
  return { md: table.join("\n"), file };
}
