// `bun run build`: compiles every binary with `bun build --compile` into dist/, embedding the build
// identity each prints for --version: name (the folder), version (package.json), git revision and build
// time, through --define (read by shared/version.ts). Two builds run at once (CI machines have 2 cores).
//
// Overrides for release pipelines that build outside a git checkout: BUILD_VERSION, BUILD_REVISION,
// BUILD_TIME (RFC 3339). Usage: bun run build [--arch amd64|arm64] [name ...]   (default: all binaries, host arch)
//
// --arch cross-compiles for linux/<arch> (`bun build --compile --target=bun-linux-<x64|aarch64>`, the runtime Bun
// publishes on npm as @oven/bun-linux-*, fetched by bun itself) into dist/linux-<arch>/<name>; without it the
// binary is for this machine, in dist/<name>. The images (scripts/images.sh) build both arches this way.
//
// --bytecode (which needs --format=esm for the top-level await of main.ts) ships JSC bytecode next to the source:
// no module is parsed or compiled to bytecode at start-up, and ~3 MiB of each binary's idle RSS moves from anonymous memory to the
// executable's own pages (shared, reclaimable), 1-1.5 MiB less in all; the file grows ~5 MB. Full --minify
// changes nothing measurable over --minify-syntax and would mangle the names in stack traces
// (docs/performance.md "Idle memory").
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { revision } from "./lib/build-identity.ts";

const root = join(import.meta.dir, "..");
const dist = join(root, "dist");

/** The four product binaries, plus the sandboxd simulator when its entry point exists. */
const PRODUCTS = ["vk-sandbox", "sandbox-apiserver", "sandbox-envd-proxy", "sandbox-e2b"];
const OPTIONAL = ["sandboxd-sim"];

const version = process.env.BUILD_VERSION || (JSON.parse(readFileSync(join(root, "package.json"), "utf8")).version as string);
const rev = revision(root);
const builtAt = process.env.BUILD_TIME || new Date().toISOString().replace(/\.\d{3}Z$/, "Z");

/** Bun's compile target for each architecture name the images and the release use (the OCI platform's). */
const BUN_TARGETS = { amd64: "bun-linux-x64", arm64: "bun-linux-aarch64" } as const;
type Arch = keyof typeof BUN_TARGETS;

function parseArgs(argv: string[]): { arch?: Arch; names: string[] } {
  const names: string[] = [];
  let arch: Arch | undefined;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const value = a === "--arch" ? argv[++i] : a.startsWith("--arch=") ? a.slice("--arch=".length) : undefined;
    if (a === "--arch" || a.startsWith("--arch=")) {
      if (value !== "amd64" && value !== "arm64") {
        console.error(`build: --arch must be amd64 or arm64, got ${JSON.stringify(value ?? "")}`);
        process.exit(2);
      }
      arch = value;
    } else if (a.startsWith("-")) {
      console.error(`build: unknown flag ${JSON.stringify(a)} (usage: bun run build [--arch amd64|arm64] [name ...])`);
      process.exit(2);
    } else names.push(a);
  }
  return { arch, names };
}

const { arch, names: requested } = parseArgs(process.argv.slice(2));
const outDir = arch ? join("dist", `linux-${arch}`) : "dist";
const targets = [...PRODUCTS, ...OPTIONAL.filter((name) => existsSync(join(root, "services", name, "main.ts")))].filter(
  (name) => requested.length === 0 || requested.includes(name),
);
for (const name of requested) {
  if (!targets.includes(name)) {
    console.error(`build: unknown or missing binary ${JSON.stringify(name)}`);
    process.exit(2);
  }
}
for (const name of targets) {
  if (!existsSync(join(root, "services", name, "main.ts"))) {
    console.error(`build: services/${name}/main.ts does not exist`);
    process.exit(1);
  }
}
mkdirSync(join(root, outDir), { recursive: true });

async function build(name: string): Promise<{ name: string; ms: number; ok: boolean; output: string }> {
  const started = performance.now();
  const proc = Bun.spawn(
    [
      process.execPath,
      "build",
      "--compile",
      "--minify-syntax",
      "--bytecode",
      "--format=esm",
      ...(arch ? [`--target=${BUN_TARGETS[arch]}`] : []),
      `services/${name}/main.ts`,
      "--outfile",
      join(outDir, name),
      "--define",
      `__SANDBOX_VERSION__=${JSON.stringify(version)}`,
      "--define",
      `__SANDBOX_REVISION__=${JSON.stringify(rev)}`,
      "--define",
      `__SANDBOX_BUILT_AT__=${JSON.stringify(builtAt)}`,
    ],
    { cwd: root, stdout: "pipe", stderr: "pipe" },
  );
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { name, ms: performance.now() - started, ok: code === 0, output: `${out}${err}`.trim() };
}

const started = performance.now();
const queue = [...targets];
const results: Awaited<ReturnType<typeof build>>[] = [];
await Promise.all(
  Array.from({ length: Math.min(2, queue.length) }, async () => {
    for (let name = queue.shift(); name !== undefined; name = queue.shift()) {
      const result = await build(name);
      results.push(result);
      console.log(`${result.ok ? "built " : "FAILED"} ${join(outDir, name)} in ${(result.ms / 1000).toFixed(1)}s`);
      if (!result.ok) console.error(result.output);
    }
  }),
);
console.log(`version ${version} rev=${rev} built=${builtAt}; ${results.length} binaries in ${((performance.now() - started) / 1000).toFixed(1)}s`);
process.exit(results.every((r) => r.ok) ? 0 : 1);
