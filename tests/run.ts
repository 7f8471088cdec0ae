// Runs the whole suite with `bun test` and ends with the closing line CI reads: "N passed, N failed".
// Counts come from bun's JUnit report, not from scraping its human output. `--contended` (ours, not bun's) runs a
// CPU burner per core beside the tests for as long as they run, so a test that waits on a clock sized for an idle
// machine fails here instead of on a busy CI runner; every other argument goes to `bun test`.
import { mkdirSync, readFileSync, existsSync, rmSync } from "node:fs";
import { availableParallelism } from "node:os";
import { join } from "node:path";
import { SUITE_TEST_TIMEOUT_MS } from "./support/test-timeout.ts";

const root = join(import.meta.dir, "..");
const outDir = join(root, "tests", ".out");
const report = join(outDir, "junit.xml");
mkdirSync(outDir, { recursive: true });
if (existsSync(report)) rmSync(report);

const args = process.argv.slice(2);
const contended = args.includes("--contended");
const load = contended ? startCpuLoad(availableParallelism()) : undefined;

// Bun 1.4.5 applies a preload's setDefaultTimeout to the first test file only; every later file fell back to bun's
// 5 s, so a busy machine failed tests that name no timeout. The flag reaches every file.
const timeout = args.some((a) => a.startsWith("--timeout")) ? [] : [`--timeout=${SUITE_TEST_TIMEOUT_MS}`];

const started = performance.now();
const proc = Bun.spawn(
  ["bun", "test", "--reporter=junit", `--reporter-outfile=${report}`, ...timeout, ...args.filter((a) => a !== "--contended")],
  { cwd: root, stdio: ["ignore", "inherit", "inherit"] },
);
if (load) {
  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    process.on(signal, () => {
      load.stop();
      proc.kill(signal);
      process.exit(130);
    });
  }
}
const code = await proc.exited;
load?.stop();
const seconds = ((performance.now() - started) / 1000).toFixed(1);

let passed = 0;
let failed = 0;
let skipped = 0;
const failures: string[] = [];
if (existsSync(report)) {
  const xml = readFileSync(report, "utf8");
  for (const m of xml.matchAll(/<testcase\b([^>]*?)(\/>|>([\s\S]*?)<\/testcase>)/g)) {
    const inner = m[3] ?? "";
    if (/<failure\b|<error\b/.test(inner)) {
      failed++;
      // The summary line must print whatever the report holds: a failure that cannot be described is named so.
      try {
        failures.push(describeFailure(m[1] ?? "", inner));
      } catch (err) {
        failures.push(`  (a failure the runner could not describe: ${String(err)})`);
      }
    } else if (/<skipped\b/.test(inner)) skipped++;
    else passed++;
  }
}
// CI keeps only the tail of the run: each failure's message and first stack lines are repeated here, at the end.
if (failures.length) {
  console.log(`\nfailures (${failures.length}), repeated from above:`);
  for (const f of failures.slice(0, 8)) console.log(f);
  if (failures.length > 8) console.log(`… and ${failures.length - 8} more (tests/.out/junit.xml)`);
}
// A runner that crashed before writing a report must not read as green.
if (code !== 0 && failed === 0) failed = 1;
console.log(`suite wall time: ${seconds}s${load ? ` (contended: ${load.count} CPU burners beside it)` : ""}`);
console.log(`${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ""}`);
process.exit(code === 0 && failed === 0 ? 0 : 1);

function describeFailure(attrs: string, inner: string): string {
  const attr = (k: string) => unescapeXml(new RegExp(`\\b${k}="([^"]*)"`).exec(attrs)?.[1] ?? "");
  const body = unescapeXml(/<(?:failure|error)\b[^>]*>([\s\S]*?)<\/(?:failure|error)>/.exec(inner)?.[1] ?? /message="([^"]*)"/.exec(inner)?.[1] ?? "");
  const lines = body.split("\n").filter((l) => l.trim() !== "");
  const shown = lines.slice(0, 14).map((l) => `    ${l.length > 400 ? `${l.slice(0, 400)}…` : l}`);
  if (lines.length > 14) shown.push(`    … ${lines.length - 14} more lines`);
  return `  ${attr("file")}:${attr("line")} ${attr("name")}\n${shown.join("\n")}`;
}

function unescapeXml(s: string): string {
  return s.replace(/&(#\d+|#x[0-9a-f]+|lt|gt|amp|quot|apos);/gi, (_, e: string) =>
    e[0] === "#" ? codePoint(e[1] === "x" || e[1] === "X" ? parseInt(e.slice(2), 16) : parseInt(e.slice(1), 10)) : ({ lt: "<", gt: ">", amp: "&", quot: '"', apos: "'" } as Record<string, string>)[e.toLowerCase()]!,
  );
}

/** A character reference's character; U+FFFD for one outside Unicode. */
function codePoint(n: number): string {
  return Number.isInteger(n) && n >= 0 && n <= 0x10ffff ? String.fromCodePoint(n) : "\ufffd";
}

/**
 * One busy process per core (`yes` into /dev/null) at the suite's own priority. Each runs under a small shell that
 * stops it when this runner is gone, so even a runner killed with SIGKILL leaves no burner behind (within a second);
 * a normal end, SIGINT or SIGTERM stops them at once.
 */
function startCpuLoad(count: number): { count: number; stop: () => void } {
  const watchdog = 'p=$1; yes >/dev/null & y=$!; trap \'kill $y 2>/dev/null; exit 0\' EXIT INT TERM; while kill -0 "$p" 2>/dev/null; do sleep 1; done';
  const burners = Array.from({ length: count }, () => Bun.spawn(["sh", "-c", watchdog, "sh", String(process.pid)], { stdio: ["ignore", "ignore", "ignore"] }));
  console.log(`contended: ${count} CPU burners (pids ${burners.map((b) => b.pid).join(", ")}) run beside the tests until they end`);
  const stop = () => {
    for (const b of burners) if (b.exitCode === null) b.kill("SIGTERM");
  };
  return { count, stop };
}
