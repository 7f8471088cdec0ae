// The real kubectl (built by peers.ts from the apiserver's wrapper module) against a TestCluster. Each call gets its
// own cache dir, so discovery is fetched fresh and a test never reads another test's cached API groups.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Subprocess } from "bun";
import { kubectlBinary } from "./peers.ts";
import { run, type RunResult } from "../support/run.ts";

export type KubectlResult = RunResult;

export interface KubectlOptions {
  kubeconfig: string;
  stdin?: string;
  timeoutMs?: number;
  env?: Record<string, string>;
}

function argvFor(binary: string, kubeconfig: string, args: string[]): string[] {
  const cacheDir = mkdtempSync(join(tmpdir(), "kubectl-cache-"));
  return [binary, `--kubeconfig=${kubeconfig}`, `--cache-dir=${cacheDir}`, ...args];
}

/** Runs kubectl to completion. Never throws on a non-zero exit: the caller asserts on code and output. */
export async function kubectl(args: string[], o: KubectlOptions): Promise<KubectlResult> {
  return run(argvFor(await kubectlBinary(), o.kubeconfig, args), {
    env: { ...process.env, KUBECONFIG: o.kubeconfig, ...(o.env ?? {}) },
    timeoutMs: o.timeoutMs ?? 30_000,
    ...(o.stdin === undefined ? {} : { stdin: o.stdin }),
  });
}

/** A long-running kubectl (`get -w`): lines arrive as kubectl prints them. stop() kills it. */
export interface KubectlStream {
  lines: string[];
  /**
   * Resolves with the first line after those earlier waitFor calls consumed that matches; rejects after timeoutMs
   * with everything printed so far.
   */
  waitFor(match: RegExp, timeoutMs?: number): Promise<string>;
  stop(): Promise<void>;
  proc: Subprocess;
}

export async function kubectlStream(args: string[], o: KubectlOptions): Promise<KubectlStream> {
  const proc = Bun.spawn(argvFor(await kubectlBinary(), o.kubeconfig, args), {
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
    env: { ...process.env, KUBECONFIG: o.kubeconfig },
  });
  const lines: string[] = [];
  let stderr = "";
  const waiters = new Set<() => void>();
  let cursor = 0;
  void (async () => {
    const decoder = new TextDecoder();
    let buf = "";
    for await (const chunk of proc.stdout as ReadableStream<Uint8Array>) {
      buf += decoder.decode(chunk, { stream: true });
      let i: number;
      while ((i = buf.indexOf("\n")) >= 0) {
        lines.push(buf.slice(0, i));
        buf = buf.slice(i + 1);
      }
      for (const w of waiters) w();
    }
  })();
  void new Response(proc.stderr).text().then((t) => (stderr = t));
  return {
    lines,
    proc,
    waitFor(match, timeoutMs = 10_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          for (; cursor < lines.length; cursor++) {
            if (match.test(lines[cursor]!)) {
              const line = lines[cursor]!;
              cursor++;
              cleanup();
              resolve(line);
              return;
            }
          }
        };
        const timer = setTimeout(() => {
          cleanup();
          reject(new Error(`kubectl ${args.join(" ")}: no line matched ${match} in ${timeoutMs} ms; got:\n${lines.join("\n")}\nstderr: ${stderr}`));
        }, timeoutMs);
        const cleanup = () => {
          clearTimeout(timer);
          waiters.delete(check);
        };
        waiters.add(check);
        check();
      });
    },
    async stop() {
      proc.kill("SIGKILL");
      await proc.exited;
    },
  };
}
