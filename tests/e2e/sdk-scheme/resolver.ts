// The SDK process's own resolver (issue 20 part 6): Debian's dnsmasq-base answering every name under a domain with
// one loopback address, and a mount namespace (`unshare --mount`) whose /etc/resolv.conf is a bind mount naming
// it, so only the command run inside resolves `api.<domain>` and `<port>-<id>.<domain>`; outside, nothing changes.
// Needs root (unshare --mount, port 53, apt-get when dnsmasq is missing): `resolverProblem()` says why not.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Subprocess } from "bun";
import { run, type RunResult } from "#tests/support/run.ts";

/** Where the issue puts the resolver; a random 127.53.x.y is used when another run holds it. */
export const RESOLVER_ADDRESS = "127.0.0.77";

/** Why the test cannot run here, or undefined. Installs dnsmasq-base with apt-get when missing and root (says so). */
export async function resolverProblem(log: (line: string) => void): Promise<string | undefined> {
  if (process.getuid?.() !== 0) return "needs root: unshare --mount, a resolver on port 53 and the proxy on port 443";
  if (Bun.which("unshare") === null) return "util-linux unshare is not installed";
  if (Bun.which("dnsmasq", { PATH: `${process.env.PATH}:/usr/sbin:/sbin` }) === null) {
    if (Bun.which("apt-get") === null) return "dnsmasq is not installed and there is no apt-get to install dnsmasq-base";
    log("dnsmasq missing: installing Debian's dnsmasq-base with apt-get (root)");
    const install = () => run(["apt-get", "install", "-y", "--no-install-recommends", "dnsmasq-base"], { env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" }, timeoutMs: 300_000 });
    let r = await install();
    if (r.code !== 0) {
      // A fresh machine may have no package lists yet: fetch them once, then try again.
      log("apt-get install dnsmasq-base failed; running apt-get update and trying again");
      await run(["apt-get", "update"], { env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" }, timeoutMs: 300_000 });
      r = await install();
    }
    if (r.code !== 0) return `apt-get install dnsmasq-base failed (exit ${r.code}): ${r.stderr.trim().split("\n").at(-1)}`;
  }
  const probe = await run(["unshare", "--mount", "true"]);
  if (probe.code !== 0) return `unshare --mount is refused here: ${probe.stderr.trim()}`;
  return undefined;
}

export interface Resolver {
  address: string;
  /** Runs `cmd` with exactly `env`, in a mount namespace whose /etc/resolv.conf names this resolver only. */
  inside(cmd: string[], env: Record<string, string>, timeoutMs?: number): Promise<RunResult>;
  stop(): Promise<void>;
}

const randomLoopback = (second: number) => `127.${second}.${1 + Math.floor(Math.random() * 250)}.${1 + Math.floor(Math.random() * 250)}`;

/** An address in 127/8 for a service on a fixed port (443): random, so parallel runs do not collide. */
export const serviceLoopback = () => randomLoopback(77);

async function startDnsmasq(address: string, domain: string, answer: string, dir: string): Promise<Subprocess<"ignore", "pipe", "pipe"> | string> {
  const dnsmasq = Bun.which("dnsmasq", { PATH: `${process.env.PATH}:/usr/sbin:/sbin` })!;
  const proc = Bun.spawn([dnsmasq, "--keep-in-foreground", "--no-resolv", "--no-hosts", "--no-poll", "--bind-interfaces", `--listen-address=${address}`, "--port=53",
    `--address=/${domain}/${answer}`, `--pid-file=${join(dir, "dnsmasq.pid")}`, "--log-facility=-", "--user=root"], { stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  // dnsmasq binds before it logs "started"; a failed bind exits with the reason.
  let text = "";
  const reader = proc.stderr.getReader();
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    const next = await Promise.race([reader.read(), Bun.sleep(200).then(() => undefined)]);
    if (next?.value) text += new TextDecoder().decode(next.value);
    if (/started, version/.test(text)) {
      reader.releaseLock();
      void proc.stderr.pipeTo(new WritableStream());
      return proc;
    }
    if (proc.exitCode !== null || next?.done) break;
  }
  proc.kill();
  await proc.exited;
  return text.trim() || "dnsmasq did not start within 10 s";
}

export async function startResolver(domain: string, answer: string): Promise<Resolver> {
  const dir = mkdtempSync(join(tmpdir(), "sdk-resolver-"));
  let address = RESOLVER_ADDRESS;
  let proc = await startDnsmasq(address, domain, answer, dir);
  if (typeof proc === "string" && /in use/i.test(proc)) {
    address = randomLoopback(53);
    proc = await startDnsmasq(address, domain, answer, dir);
  }
  if (typeof proc === "string") {
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`dnsmasq on ${address}: ${proc}`);
  }
  const dnsmasq = proc;
  const resolvConf = join(dir, "resolv.conf");
  writeFileSync(resolvConf, `nameserver ${address}\noptions attempts:2 timeout:2\n`);
  return {
    address,
    inside: (cmd, env, timeoutMs = 180_000) =>
      run(["unshare", "--mount", "--propagation", "private", "sh", "-c", 'mount --bind "$0" /etc/resolv.conf && exec "$@"', resolvConf, ...cmd], { env, timeoutMs }),
    async stop() {
      dnsmasq.kill();
      await dnsmasq.exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
