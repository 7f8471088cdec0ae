// Makes and caches the venv holding the Python e2b SDK and the e2b-code-interpreter SDK the tests drive (requirements.txt, every version pinned), the
// way tests/kube/peers.ts caches the Go-built peers: under $SANDBOX_CACHE, keyed by a hash of the pins and of the
// interpreter the venv is bound to, so a second run is instant and a changed pin makes a new venv beside the old.
// A venv is made in a work dir and renamed into place with its marker: an interrupted install is never used.
//
//   bun run tests/support/python/venv.ts ensure     make it if missing, print where and how long it took
import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { cacheRoot } from "#tests/kube/peers.ts";
import { run } from "#tests/support/run.ts";

const requirements = join(import.meta.dir, "requirements.txt");
const MARKER = ".installed";
/** e2b 2.63's Requires-Python. */
const MIN_PYTHON: [number, number] = [3, 11];

export interface PythonSdk {
  /** The venv's interpreter: runs scripts with the pinned e2b importable. */
  python: string;
  /** The e2b version installed (from requirements.txt). */
  e2bVersion: string;
  built: boolean;
  seconds: number;
}

/** The pinned e2b version, read from requirements.txt. */
export function pinnedE2bVersion(): string {
  return pinnedVersion("e2b");
}

/** The version requirements.txt pins for `name` (e2b, e2b-code-interpreter). */
export function pinnedVersion(name: string): string {
  const m = new RegExp(`^${name.replace(/[.-]/g, "\\$&")}==(\\S+)$`, "m").exec(readFileSync(requirements, "utf8"));
  if (!m) throw new Error(`${requirements} pins no ${name}==<version>`);
  return m[1]!;
}

async function hostPython(): Promise<{ exe: string; version: string }> {
  const exe = process.env.PYTHON || "python3";
  const r = await run([exe, "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3]); print(sys.executable)"]).catch((e: unknown) => ({ code: -1, stdout: "", stderr: String(e) }));
  if (r.code !== 0) throw new Error(`the Python SDK tests need ${exe} (>= ${MIN_PYTHON.join(".")}): ${r.stderr.trim() || `exit ${r.code}`}`);
  const [version = "", resolved = exe] = r.stdout.trim().split("\n");
  const [major = 0, minor = 0] = version.split(".").map(Number);
  if (major < MIN_PYTHON[0] || (major === MIN_PYTHON[0] && minor < MIN_PYTHON[1])) {
    throw new Error(`e2b ${pinnedE2bVersion()} needs Python >= ${MIN_PYTHON.join(".")}; ${resolved} is ${version} (set PYTHON to a newer interpreter)`);
  }
  return { exe: resolved, version };
}

/** `<e2b version>-<12 hex>`: the pins plus the interpreter's path and version, everything the venv depends on. */
function venvKey(py: { exe: string; version: string }): string {
  const h = createHash("sha256").update(readFileSync(requirements)).update("\0").update(py.exe).update("\0").update(py.version);
  return `${pinnedE2bVersion()}-${h.digest("hex").slice(0, 12)}`;
}

/** Work dirs of installs whose process is gone (killed mid-install). */
function removeAbandoned(dir: string): void {
  const parent = dirname(dir);
  const prefix = `${basename(dir)}.tmp-`;
  for (const name of existsSync(parent) ? readdirSync(parent) : []) {
    if (!name.startsWith(prefix)) continue;
    const pid = Number(name.slice(prefix.length));
    let alive = false;
    try {
      process.kill(pid, 0);
      alive = true;
    } catch {
      // no such process
    }
    if (!alive) rmSync(join(parent, name), { recursive: true, force: true });
  }
}

let pending: Promise<PythonSdk> | undefined;

/** The venv with the pinned SDK, made first if this key has never been made here. One install per process. */
export function ensurePythonSdk(): Promise<PythonSdk> {
  pending ??= make().catch((e: unknown) => {
    pending = undefined;
    throw e;
  });
  return pending;
}

async function make(): Promise<PythonSdk> {
  const started = performance.now();
  const py = await hostPython();
  const dir = join(cacheRoot(), `python-e2b-${venvKey(py)}`);
  const python = join(dir, "bin", "python");
  const result = (built: boolean): PythonSdk => ({ python, e2bVersion: pinnedE2bVersion(), built, seconds: (performance.now() - started) / 1000 });
  if (existsSync(join(dir, MARKER))) return result(false);
  rmSync(dir, { recursive: true, force: true }); // an install from before the marker existed, or a broken one
  removeAbandoned(dir);
  // Made beside its final place and renamed into it once complete, so a second process (bootstrap and a test run
  // at once) never sees a half-made venv; only bin/python is used, which finds its venv by its own location.
  const work = `${dir}.tmp-${process.pid}`;
  const workPython = join(work, "bin", "python");
  const step = async (what: string, cmd: string[]) => {
    const r = await run(cmd, { timeoutMs: 300_000 });
    if (r.code !== 0) throw new Error(`${what} failed (exit ${r.code}): ${cmd.join(" ")}\n${(r.stdout + r.stderr).slice(-4000)}`);
  };
  try {
    await step("making the Python SDK venv", [py.exe, "-m", "venv", work]);
    // --no-deps with every transitive pin listed: pip installs exactly the file, resolving nothing.
    await step("installing the pinned Python SDK from PyPI", [workPython, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps", "-r", requirements]);
    await step("importing the installed SDKs", [workPython, "-c", "import e2b, e2b_code_interpreter"]);
    writeFileSync(join(work, MARKER), `${pinnedE2bVersion()}\n`);
    renameSync(work, dir);
  } catch (e) {
    rmSync(work, { recursive: true, force: true });
    if (existsSync(join(dir, MARKER))) return result(false); // another process finished first
    throw e;
  }
  if (!existsSync(join(dir, MARKER))) throw new Error(`the Python SDK venv ${dir} has no ${MARKER} after its install`);
  return result(true);
}

if (import.meta.main) {
  if (process.argv[2] !== "ensure") {
    console.error("usage: bun run tests/support/python/venv.ts ensure");
    process.exit(2);
  }
  const r = await ensurePythonSdk();
  console.error(`python e2b ${r.e2bVersion}: ${r.built ? "installed" : "cached"} in ${r.seconds.toFixed(1)} s (${r.python})`);
}
