// Runs the local stack the way a new user does (`bash scripts/stack.sh [--mesh]` from the repo root), on free
// ports and a throwaway state dir, reads the export lines it prints, and stops it with Ctrl-C (SIGINT).
// `leftovers()` names whatever is still running or still on disk afterwards.
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, statSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Subprocess } from "bun";
import { PORTS, type PortName } from "#scripts/stack/ports.ts";
import { freePorts } from "#tests/kube/ports.ts";

export const REPO = join(import.meta.dir, "../../..");

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer().once("error", reject).listen(0, "127.0.0.1", () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

export interface RunningStack {
  proc: Subprocess<"ignore", "pipe", "pipe">;
  /** Every line printed so far (stdout). */
  out: string[];
  /** The exported variables, parsed from `export K=V` lines. */
  env: Record<string, string>;
  ports: Record<PortName, number>;
  stateDir: string;
  /** The run's temp work dir (from KUBECONFIG or the guest directories' parent), if seen. */
  workDir: string | undefined;
  readySeconds: number;
  stop(): Promise<number>;
  leftovers(): Promise<string[]>;
  /**
   * Stops it if still running and removes its state dir, keeping its logs in tests/.out/stack-logs/<label>-<time>
   * (the newest few): a failure met once in a long contended run can then be read afterwards.
   */
  discard(label: string): Promise<void>;
}

const STACK_LOGS = join(REPO, "tests", ".out", "stack-logs");
/** How many stacks' logs are kept (each a few MB at most). */
const STACK_LOGS_KEPT = 12;

function archiveLogs(stateDir: string, label: string): void {
  const logs = join(stateDir, "logs");
  if (!existsSync(logs)) return;
  mkdirSync(STACK_LOGS, { recursive: true });
  cpSync(logs, join(STACK_LOGS, `${label.replace(/[^a-z0-9-]+/gi, "-")}-${new Date().toISOString().replace(/[:.]/g, "-")}`), { recursive: true });
  const kept = readdirSync(STACK_LOGS)
    .map((name) => ({ name, at: statSync(join(STACK_LOGS, name)).mtimeMs }))
    .sort((a, b) => b.at - a.at);
  for (const old of kept.slice(STACK_LOGS_KEPT)) rmSync(join(STACK_LOGS, old.name), { recursive: true, force: true });
}

async function portTaken(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.createServer().once("error", () => resolve(true)).listen({ port, host: "127.0.0.1", exclusive: true }, () => s.close(() => resolve(false)));
  });
}

/** Process ids whose command line mentions `dir` or whose working directory is inside it (sandbox commands). */
function processesUsing(dir: string): number[] {
  const out: number[] = [];
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d) || Number(d) === process.pid) continue;
    try {
      let cwd = "";
      try {
        cwd = readlinkSync(`/proc/${d}/cwd`);
      } catch {
        // not ours to read
      }
      if (readFileSync(`/proc/${d}/cmdline`, "utf8").includes(dir) || cwd.startsWith(dir)) out.push(Number(d));
    } catch {
      // exited meanwhile
    }
  }
  return out;
}

/** `env` is laid over this process's environment (the README test takes bun off PATH with it). */
export async function startStack(args: string[], readyTimeoutMs = 120_000, extraEnv: Record<string, string> = {}): Promise<RunningStack> {
  const ports = {} as Record<PortName, number>;
  const env: Record<string, string> = { ...(process.env as Record<string, string>), ...extraEnv };
  // All at once (each held until every one is chosen): one at a time, the kernel may hand the same port out twice.
  const names = Object.keys(PORTS) as PortName[];
  const chosen = freePorts(names.length);
  names.forEach((name, i) => {
    ports[name] = chosen[i]!;
    env[PORTS[name].env] = String(chosen[i]);
  });
  const stateDir = mkdtempSync(join(tmpdir(), "stack-test-state-"));
  env.STACK_STATE_DIR = stateDir;
  const started = performance.now();
  const proc = Bun.spawn(["bash", "scripts/stack.sh", ...args], { cwd: REPO, env, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  const out: string[] = [];
  const err: string[] = [];
  const exported: Record<string, string> = {};
  let readySeconds = 0;
  let markReady!: (ok: boolean) => void;
  const ready = new Promise<boolean>((r) => (markReady = r));
  // Reads stdout to the end (the stop lines come after the ready line); resolves `ready` at the ready line.
  void (async () => {
    const decoder = new TextDecoder();
    let buf = "";
    for await (const chunk of proc.stdout) {
      buf += decoder.decode(chunk);
      let i: number;
      while ((i = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        out.push(line);
        const m = /^export ([A-Z0-9_]+)=(.*)$/.exec(line);
        if (m) exported[m[1]!] = m[2]!;
        if (line.includes("Ctrl-C stops everything")) {
          readySeconds = (performance.now() - started) / 1000;
          markReady(true);
        }
      }
    }
    markReady(false);
  })();
  void (async () => {
    for await (const chunk of proc.stderr) err.push(new TextDecoder().decode(chunk));
  })();
  const timer = new Promise<false>((r) => setTimeout(() => r(false), readyTimeoutMs));
  if (!(await Promise.race([ready, timer]))) {
    proc.kill("SIGINT");
    await proc.exited;
    rmSync(stateDir, { recursive: true, force: true });
    throw new Error(`stack did not become ready:\n${out.join("\n")}\n${err.join("")}`);
  }
  const workDir = /(\/\S*sandbox-stack-[^/\s]+)/.exec(out.join("\n"))?.[1];
  let stoppedCode: number | undefined;
  const stack: RunningStack = {
    proc,
    out,
    env: exported,
    ports,
    stateDir,
    workDir,
    readySeconds,
    async discard(label: string) {
      await stack.stop();
      archiveLogs(stateDir, label);
      rmSync(stateDir, { recursive: true, force: true });
    },
    async stop() {
      if (stoppedCode === undefined) {
        proc.kill("SIGINT");
        stoppedCode = await proc.exited;
        await Bun.sleep(50); // the last lines still in the pipe
      }
      return stoppedCode;
    },
    async leftovers() {
      const left: string[] = [];
      const used = args.includes("--mesh") ? (["e2b", "proxy", "node0", "node1"] as PortName[]) : (["e2b", "proxy", "node0", "node1", "kubelet0", "kubelet1", "apiserver"] as PortName[]);
      for (const n of used) if (await portTaken(ports[n])) left.push(`port ${ports[n]} (${PORTS[n].what}) still bound`);
      // The kube-apiserver takes free ports of its own; the stack prints its URL.
      const kube = /kube-apiserver https:\/\/127\.0\.0\.1:(\d+)/.exec(out.join("\n"))?.[1];
      if (kube && (await portTaken(Number(kube)))) left.push(`port ${kube} (kube-apiserver) still bound`);
      if (workDir) {
        if (existsSync(workDir)) left.push(`temp dir ${workDir} still exists`);
        for (const pid of processesUsing(workDir)) left.push(`process ${pid} still running`);
      }
      return left;
    },
  };
  return stack;
}
