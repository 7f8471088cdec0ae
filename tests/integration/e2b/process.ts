// A binary as a real child process (bun services/<binary>/main.ts): for exit codes, startup messages, log lines and
// measurements that must see only the server's own memory. spawnE2b is sandbox-e2b; spawnService any of the four.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startSimCluster, type SimCluster } from "#services/sandboxd-sim/sim.ts";
import { startTestGuest, type TestGuest } from "./guest.ts";

const SERVICES = join(import.meta.dir, "../../../services");

export interface Child {
  proc: ReturnType<typeof Bun.spawn>;
  /** Lines of stderr+stdout seen so far. */
  output(): string;
  /** Resolves with the value of the first log line whose msg matches, e.g. the bound port. */
  waitFor(msg: string, ms?: number): Promise<Record<string, unknown>>;
  /** The JSON log lines seen so far whose msg is `msg`. */
  logLines(msg: string): Record<string, unknown>[];
  exited: Promise<number>;
  stop(): Promise<void>;
}

export function spawnE2b(args: string[], env: Record<string, string> = {}): Child {
  return spawnService("sandbox-e2b", args, env);
}

/**
 * services/<binary>/main.ts with `args`, OPERATOR_LOG_LEVEL=info and `env` over this process's environment; from
 * this tree, or from the tree at `root` (the before/after benches run another revision's binary).
 */
export function spawnService(binary: "sandbox-e2b" | "sandbox-envd-proxy" | "sandbox-apiserver", args: string[], env: Record<string, string> = {}, root?: string): Child {
  const proc = Bun.spawn(["bun", join(root === undefined ? SERVICES : join(root, "services"), binary, "main.ts"), ...args], { stdout: "pipe", stderr: "pipe", env: { ...process.env, OPERATOR_LOG_LEVEL: "info", ...env } });
  let text = "";
  const lines: Record<string, unknown>[] = [];
  const waiters: { msg: string; resolve: (v: Record<string, unknown>) => void }[] = [];
  const read = async (s: ReadableStream<Uint8Array>) => {
    for await (const chunk of s) {
      text += new TextDecoder().decode(chunk);
      let nl: number;
      while ((nl = text.indexOf("\n")) >= 0) {
        const line = text.slice(0, nl);
        text = text.slice(nl + 1);
        all += line + "\n";
        try {
          const obj = JSON.parse(line) as Record<string, unknown>;
          lines.push(obj);
          for (const w of [...waiters]) if (obj.msg === w.msg) w.resolve(obj);
        } catch {
          // not a log line
        }
      }
    }
  };
  let all = "";
  void read(proc.stdout as ReadableStream<Uint8Array>);
  void read(proc.stderr as ReadableStream<Uint8Array>);
  return {
    proc,
    output: () => all + text,
    waitFor: (msg, ms = 15_000) =>
      new Promise((resolve, reject) => {
        const seen = lines.find((l) => l.msg === msg);
        if (seen) return resolve(seen);
        const t = setTimeout(() => reject(new Error(`no log line "${msg}" within ${ms} ms; output:\n${all}${text}`)), ms);
        waiters.push({ msg, resolve: (v) => (clearTimeout(t), resolve(v)) });
      }),
    logLines: (msg) => lines.filter((l) => l.msg === msg),
    exited: proc.exited,
    stop: async () => {
      proc.kill("SIGTERM");
      await proc.exited;
    },
  };
}

/** Peak resident set size of a process (Linux VmHWM), in bytes. */
export async function peakRss(pid: number): Promise<number> {
  const status = await Bun.file(`/proc/${pid}/status`).text();
  const kb = Number(/VmHWM:\s+(\d+) kB/.exec(status)?.[1] ?? NaN);
  return kb * 1024;
}

export async function currentRss(pid: number): Promise<number> {
  const status = await Bun.file(`/proc/${pid}/status`).text();
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? NaN) * 1024;
}

/**
 * What a sandbox-e2b process with its in-process proxy serves in a test: one simulated node (pool `img`) with the
 * shared test guest behind its ports relay, and a directory holding the envd secret and a one-key API key file.
 * `args` are the process's flags over it, every listener on a free port.
 */
export interface E2bProcessFixture {
  cluster: SimCluster;
  guest: TestGuest;
  args: string[];
  stop(): Promise<void>;
}

/** `keys`: the whole key file (quota fields, several namespaces) instead of the one `apiKey` line. */
export async function e2bProcessFixture(o: { rootToken: string; apiKey: string; domain: string; keys?: string }): Promise<E2bProcessFixture> {
  const cluster = await startSimCluster(1, { rootToken: o.rootToken, pools: ["img/none/small=2"] });
  const guest = await startTestGuest();
  cluster.nodes[0]!.attachGuest("*", 49983, guest.port);
  const dir = mkdtempSync(join(tmpdir(), "e2b-process-"));
  writeFileSync(join(dir, "secret"), "secret\n");
  writeFileSync(join(dir, "keys"), o.keys ?? `${o.apiKey}\n`);
  return {
    cluster,
    guest,
    args: [
      `--sandboxd-seeds=${cluster.nodes[0]!.addr}`,
      `--sandboxd-token=${o.rootToken}`,
      "--e2b-bind-address=127.0.0.1:0",
      "--envd-proxy-bind-address=127.0.0.1:0",
      `--e2b-domain=${o.domain}`,
      `--e2b-envd-secret-file=${join(dir, "secret")}`,
      `--e2b-api-key-file=${join(dir, "keys")}`,
    ],
    stop: async () => {
      await guest.stop();
      await cluster.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
