// Runs the whole suite with `bun test` and ends with the closing line CI reads: "N passed, N failed".
// Counts come from bun's JUnit report, not from scraping its human output.
import { mkdirSync, readFileSync, existsSync, rmSync } from "node:fs";
import { join } from "node:path";

const root = join(import.meta.dir, "..");
const outDir = join(root, "tests", ".out");
const report = join(outDir, "junit.xml");
mkdirSync(outDir, { recursive: true });
if (existsSync(report)) rmSync(report);

const started = performance.now();
const proc = Bun.spawn(
  ["bun", "test", "--reporter=junit", `--reporter-outfile=${report}`, ...process.argv.slice(2)],
  { cwd: root, stdio: ["ignore", "inherit", "inherit"] },
);
const code = await proc.exited;
const seconds = ((performance.now() - started) / 1000).toFixed(1);

let passed = 0;
let failed = 0;
let skipped = 0;
if (existsSync(report)) {
  const xml = readFileSync(report, "utf8");
  for (const m of xml.matchAll(/<testcase\b[^>]*?(\/>|>([\s\S]*?)<\/testcase>)/g)) {
    const inner = m[2] ?? "";
    if (/<failure\b|<error\b/.test(inner)) failed++;
    else if (/<skipped\b/.test(inner)) skipped++;
    else passed++;
  }
}
// A runner that crashed before writing a report must not read as green.
if (code !== 0 && failed === 0) failed = 1;
console.log(`suite wall time: ${seconds}s`);
console.log(`${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ""}`);
process.exit(code === 0 && failed === 0 ? 0 : 1);
