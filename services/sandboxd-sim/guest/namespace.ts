// sandboxd-sim guest — development substrate, not product code. See README.md in this folder.
//
// One namespaced sandbox: a process tree in its own mount, PID, IPC and UTS namespaces (and, on the `none`
// lane, its own network namespace with only `lo`), whose root is the sandbox's layer (layer.ts) with the host's
// system directories overlaid read-only below. Started with util-linux `unshare`; its PID 1 is a shell chrooted
// into the root that only waits. Commands enter it with `nsenter` (all namespaces and the root), then drop to the
// sandbox user with `setpriv` against the sandbox's own /etc/passwd. The host reaches the sandbox's files through
// /proc/<pid 1>/root (the kernel resolves it in the sandbox's mount namespace and root), and its loopback ports
// through ns-relay.ts, started on first use inside its network namespace only, listening on D/relay.sock.
// Rootless (the simulator is not root, isolation.ts): the same in a user namespace of its own too, which maps the
// simulator's uid (only it) to root inside; every command then runs as that one uid (nsenter -U, no setpriv).
// Not a VM and not a security boundary: same kernel. Rootful, root inside is uid 0 on the host, kept inside its root
// by a bounded capability set (ROOT_CAPABILITIES) and read-only host knobs under /proc: it cannot chroot out, mount,
// make devices or write the host kernel's sysctls, but a kernel bug is the host's.
import { spawn, type ChildProcess } from "node:child_process";
import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import { join } from "node:path";
import { Freezer } from "./freezer.ts";
import { overlaidDirs, removeTree } from "./layer.ts";
import { toolEnv, userNamespaceArgs } from "./isolation.ts";
import { recordNamespace } from "./reap.ts";
import { statFields } from "./proc-stat.ts";

const RELAY_SCRIPT = new URL("./ns-relay.ts", import.meta.url).pathname;
/**
 * The capability bounding set of every command in a rootful sandbox: what root's ordinary work inside needs (own
 * files, chown, users, signals, low ports, ping), as a container runtime's default, minus SYS_CHROOT (with it, root
 * leaves a chroot for the mount namespace's real root, the host's: `chroot` is not `pivot_root`) and MKNOD (a host
 * disk's device node). Without SYS_ADMIN, DAC_READ_SEARCH, SYS_PTRACE, SYS_MODULE, SYS_RAWIO, NET_ADMIN and the
 * rest: no mount, no open_by_handle_at, no module, no raw memory. Issue 27: a build RUN as root left its chroot.
 */
export const ROOT_CAPABILITIES = "-all,+chown,+dac_override,+fowner,+fsetid,+kill,+setgid,+setuid,+setpcap,+setfcap,+net_bind_service,+net_raw,+audit_write";
/**
 * The same on the egress lane, which shares the host's network namespace: without NET_RAW, since a packet socket there
 * reads every packet of the host's own interfaces, its loopback included (a root token on its way to the node,
 * another sandbox's envd token). Ping inside then needs the kernel's unprivileged ICMP (net.ipv4.ping_group_range).
 */
export const HOST_NETWORK_ROOT_CAPABILITIES = ROOT_CAPABILITIES.replace(",+net_raw", "");

/** Launches of `unshare` tried when it fails at once on its signal mask (started()). */
const LAUNCH_ATTEMPTS = 3;
const START_TIMEOUT_MS = 20_000;

// PID 1 (the last line) handles no signal that ends it (dash handles INT while it waits; it is ignored here): a
// namespace's init gets from inside it only the signals it handles, so root inside cannot end it (the host ends it
// with SIGKILL). While it lives its number is the sandbox's; once it is gone
// the number is free for any host process (Namespace.alive).
// $1 dir, $2 hostname, $3 own network (1/0), $4 rootful (1: the simulator is root, no user namespace), then the
// overlaid system dirs. Rootful, the host kernel's knobs under /proc (sysctls, sysrq, irq, bus, fs) are read-only
// inside: their files check only the uid, and root inside is uid 0 on the host (core_pattern runs a program as the
// host's root). Rootless they already belong to the host's root, not to the namespace's.
const SETUP = String.raw`set -e
D=$1; ID=$2; NET=$3; ROOTFUL=$4; shift 4
L=$D/layer
for s in "$@"; do mount -t overlay overlay -o "lowerdir=/$s,upperdir=$D/sys/$s/up,workdir=$D/sys/$s/work" "$L/$s"; done
mount -t proc proc "$L/proc"
if [ "$ROOTFUL" = 1 ]; then
  for p in sys sysrq-trigger irq bus fs; do
    if [ -e "$L/proc/$p" ]; then mount --bind "$L/proc/$p" "$L/proc/$p"; mount -o remount,bind,ro "$L/proc/$p"; fi
  done
fi
mount -t tmpfs -o mode=755,size=1m dev "$L/dev"
for n in null zero full random urandom tty; do : > "$L/dev/$n"; mount --bind "/dev/$n" "$L/dev/$n"; done
mkdir "$L/dev/pts" "$L/dev/shm"
mount -t devpts -o newinstance,ptmxmode=0666,mode=0620 devpts "$L/dev/pts"
ln -s pts/ptmx "$L/dev/ptmx"
mount -t tmpfs -o mode=1777 shm "$L/dev/shm"
ln -s /proc/self/fd "$L/dev/fd"; ln -s /proc/self/fd/0 "$L/dev/stdin"; ln -s /proc/self/fd/1 "$L/dev/stdout"; ln -s /proc/self/fd/2 "$L/dev/stderr"
# The hostname tool refuses the "_" of a sandbox id; rootless, /proc/sys is the host root's: sethostname(2) then.
{ printf %s "$ID" > /proc/sys/kernel/hostname; } 2>/dev/null || python3 -c 'import socket,sys; socket.sethostname(sys.argv[1])' "$ID"
if [ "$NET" = 1 ]; then ip link set lo up; fi
exec chroot "$L" /bin/sh -c 'echo ready; exec </dev/null >/dev/null 2>&1; trap "" HUP INT QUIT TERM USR1 USR2 ALRM; while :; do sleep infinity & wait; done'
`;

export interface NamespaceOptions {
  /** The sandbox's host directory (layer.ts layout). */
  dir: string;
  hostname: string;
  /** Own network namespace (the `none` lane); false shares the host's network (the `egress` lane). */
  ownNetwork: boolean;
  /** Freezer cgroup name (unique per sandbox on the host). */
  cgroup: string;
  /** false: no freezer cgroup, hibernate stops the processes with SIGSTOP (the path for hosts without one). */
  freezer?: boolean;
  /** A user namespace of its own mapping the simulator's (non-root) uid to root inside (isolation.ts). */
  rootless?: boolean;
}

export interface Identity {
  uid: number;
  gid: number;
}

function childOf(parent: number): number | undefined {
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const f = statFields(readFileSync(`/proc/${d}/stat`, "utf8"));
      if (Number(f[1]) === parent) return Number(d);
    } catch {
      // exited meanwhile
    }
  }
  return undefined;
}

/** Host pids whose PID namespace is `nsLink` (readlink of /proc/<pid>/ns/pid). */
function pidsInNamespace(nsLink: string): number[] {
  const out: number[] = [];
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      if (readlinkSync(`/proc/${d}/ns/pid`) === nsLink) out.push(Number(d));
    } catch {
      // exited meanwhile
    }
  }
  return out;
}

export class Namespace {
  readonly ready: Promise<void>;
  readonly ownNetwork: boolean;
  readonly socketPath: string;
  private readonly freezer: Freezer | undefined;
  private launcher: ChildProcess;
  private pid1 = 0;
  private nsLink = "";
  /** The launcher exited after PID 1 was up: PID 1 is gone and its number may be any host process's now. */
  private ended = false;
  private relay: Promise<void> | undefined;
  private relayProc: ChildProcess | undefined;
  private gone: Promise<void> | undefined;

  constructor(readonly o: NamespaceOptions) {
    this.ownNetwork = o.ownNetwork;
    this.socketPath = join(o.dir, "relay.sock");
    this.freezer = o.freezer === false ? undefined : Freezer.create(o.cgroup);
    const unshare = ["unshare", ...userNamespaceArgs(o.rootless), "--mount", "--pid", "--fork", "--kill-child", "--uts", "--ipc", ...(o.ownNetwork ? ["--net"] : []), "--propagation", "private",
      "/bin/sh", "-c", SETUP, "sh", o.dir, o.hostname, o.ownNetwork ? "1" : "0", o.rootless ? "0" : "1", ...overlaidDirs()];
    const [cmd, args] = this.inCgroup(unshare);
    this.launcher = spawn(cmd, args, { stdio: ["ignore", "pipe", "pipe"], cwd: "/", env: toolEnv() });
    this.ready = this.started(cmd, args, LAUNCH_ATTEMPTS);
    this.ready.catch(() => {}); // observed by the guest's requests; not an unhandled rejection here
  }

  /**
   * Resolves once the launcher's PID 1 is up. util-linux `unshare --fork` started from Bun now and then dies at once
   * with `sigprocmask unblock failed: Invalid argument`, before it created anything: that failure alone is retried
   * with a fresh launcher (LAUNCH_ATTEMPTS in all); any other exit is final.
   */
  private started(cmd: string, args: string[], attempts: number): Promise<void> {
    const o = this.o;
    const launcher = this.launcher;
    let stderr = "";
    launcher.stderr!.on("data", (c: Buffer) => (stderr = (stderr + c.toString()).slice(-2000)));
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`sandbox ${o.hostname}: namespace not ready after ${START_TIMEOUT_MS} ms`)), START_TIMEOUT_MS);
      let out = "";
      launcher.stdout!.on("data", (c: Buffer) => {
        out += c.toString();
        if (!out.includes("ready\n") || this.pid1) return;
        clearTimeout(timer);
        const pid1 = childOf(launcher.pid!);
        if (!pid1) return reject(new Error(`sandbox ${o.hostname}: namespace init not found`));
        this.pid1 = pid1;
        this.nsLink = readlinkSync(`/proc/${pid1}/ns/pid`);
        recordNamespace(o.dir, pid1, this.nsLink); // found again after a SIGKILL of the simulator (reap.ts)
        resolve();
      });
      launcher.once("exit", (code, sig) => {
        clearTimeout(timer);
        if (this.pid1) {
          this.ended = true; // unshare --fork exits once it has reaped PID 1
          return;
        }
        if (attempts > 1 && code === 1 && stderr.includes("sigprocmask")) {
          this.launcher = spawn(cmd, args, { stdio: ["ignore", "pipe", "pipe"], cwd: "/", env: toolEnv() });
          this.started(cmd, args, attempts - 1).then(resolve, reject);
          return;
        }
        reject(new Error(`sandbox ${o.hostname}: namespace setup exited (${code ?? sig}): ${stderr.trim()}`));
      });
    });
  }

  /** The sandbox's "/" seen from the host (valid once ready, while alive(): check it before each use). */
  get rootPath(): string {
    return `/proc/${this.pid1}/root`;
  }

  /**
   * PID 1 is still this sandbox's: up, its launcher not exited, and the process with its number is in the sandbox's
   * PID namespace. Once PID 1 is gone (the host's OOM killer, a kill from the host) its number is free, and a host
   * process given it would make /proc/<pid>/root the host's "/" and nsenter -t <pid> the host's namespaces.
   */
  alive(): boolean {
    if (!this.pid1 || this.ended) return false;
    try {
      return readlinkSync(`/proc/${this.pid1}/ns/pid`) === this.nsLink;
    } catch {
      return false;
    }
  }

  /** Throws NamespaceEnded unless alive(). */
  assertAlive(): void {
    if (!this.alive()) throw new NamespaceEnded(`sandbox ${this.o.hostname}: its init process is gone (the sandbox ended); release it`);
  }

  /**
   * Start the ports relay (ns-relay.ts) on first use: a Bun process that enters only the sandbox's network
   * namespace (so the sandbox's own processes never see it, and a sandbox that serves no port pays nothing for
   * it), in the sandbox's cgroup (frozen with it, killed with it). Settles once it listens on socketPath.
   */
  ensureRelay(): Promise<void> {
    if (!this.ownNetwork) return Promise.resolve();
    return (this.relay ??= this.ready.then(
      () =>
        new Promise<void>((resolve, reject) => {
          // Rootless: joining the network namespace needs its owner, the user namespace, first.
          this.assertAlive();
          const [cmd, args] = this.inCgroup(["nsenter", "-t", String(this.pid1), ...(this.o.rootless ? ["-U", "--preserve-credentials"] : []), "-n", "--", process.execPath, RELAY_SCRIPT, this.socketPath]);
          const p = spawn(cmd, args, { stdio: ["ignore", "pipe", "pipe"], cwd: "/", env: toolEnv() });
          this.relayProc = p;
          let err = "";
          p.stderr!.on("data", (c: Buffer) => (err = (err + c.toString()).slice(-1000)));
          p.stdout!.on("data", (c: Buffer) => {
            if (c.toString().includes("listening")) resolve();
          });
          p.once("exit", (code, sig) => {
            this.relay = undefined; // a later connection starts a new one
            reject(new Error(`sandbox ${this.o.hostname}: ports relay exited (${code ?? sig}): ${err.trim()}`));
          });
        }),
    ));
  }

  /** Host command line that runs argv inside the sandbox as `who`, starting in the guest directory `cwd`. */
  command(argv: string[], cwd: string, who: Identity): [string, string[]] {
    this.assertAlive();
    const enter = ["nsenter", "-t", String(this.pid1), ...(this.o.rootless ? ["-U", "--preserve-credentials"] : []), "-m", "-p", "-u", "-i", ...(this.ownNetwork ? ["-n"] : []), "-r", `-w${this.rootPath}${cwd}`, "--"];
    // Rootless: nsenter -U already made the command root inside, the only uid the namespace maps (and setgroups is denied).
    if (this.o.rootless) return this.inCgroup([...enter, ...argv]);
    // Rootful, root inside is uid 0 on the host: its capabilities are bounded (ROOT_CAPABILITIES) so it cannot leave
    // the chroot, mount, make devices or reach the host by handle; every user's, so a setuid binary gains no more. On
    // the host's network (egress lane) no NET_RAW either: a packet socket there reads the host's traffic.
    const bounding = this.ownNetwork ? ROOT_CAPABILITIES : HOST_NETWORK_ROOT_CAPABILITIES;
    return this.inCgroup([...enter, "setpriv", `--reuid=${who.uid}`, `--regid=${who.gid}`, ...(who.uid === 0 ? ["--clear-groups"] : ["--init-groups"]), `--bounding-set=${bounding}`, "--", ...argv]);
  }

  private inCgroup(argv: string[]): [string, string[]] {
    if (!this.freezer) return [argv[0]!, argv.slice(1)];
    // The shell joins the cgroup, then becomes argv: everything it starts is in the cgroup from its first instruction.
    return ["/bin/sh", ["-c", 'echo $$ > "$0" && exec "$@"', this.freezer.procsFile, ...argv]];
  }

  /** Every host pid of the sandbox: its PID namespace, plus the nsenter parents in the cgroup. */
  pids(): number[] {
    const all = new Set(this.nsLink ? pidsInNamespace(this.nsLink) : []);
    for (const p of this.freezer?.pids() ?? []) all.add(p);
    const relay = this.relayProc;
    if (relay?.pid && relay.exitCode === null && relay.signalCode === null) all.add(relay.pid);
    return [...all];
  }

  /** How hibernate stops this sandbox. */
  get pauseMode(): "freezer-v1" | "freezer-v2" | "sigstop" {
    return this.freezer ? (`freezer-v${this.freezer.version}` as const) : "sigstop";
  }
  /** The sandbox's freezer cgroup directory, if it has one. */
  get cgroupDir(): string | undefined {
    return this.freezer?.dir;
  }
  /** The freezer reports every process frozen (always false without one). */
  frozen(): boolean {
    return this.freezer?.frozen() ?? false;
  }

  pause(): void {
    if (this.freezer) return this.freezer.freeze();
    for (const p of this.pids()) signal(p, "SIGSTOP");
  }
  resume(): void {
    if (this.freezer) return this.freezer.thaw();
    for (const p of this.pids()) signal(p, "SIGCONT");
  }

  /** Kill synchronously what can be killed now (process exit path). */
  killNow(): void {
    this.freezer?.thaw();
    if (this.alive()) signal(this.pid1, "SIGKILL"); // never a host process that inherited its number
    signal(this.launcher.pid!, "SIGKILL");
    if (this.relayProc?.pid) signal(this.relayProc.pid, "SIGKILL");
    for (const p of this.pids()) signal(p, "SIGKILL");
  }

  /**
   * Release: kill every process (PID 1's death ends the PID namespace; the mounts go with the mount namespace),
   * wait until none is left, remove the cgroup and the directory. Idempotent.
   */
  destroy(): Promise<void> {
    return (this.gone ??= (async () => {
      this.killNow();
      const deadline = Date.now() + 10_000;
      while (Date.now() < deadline) {
        const left = this.pids();
        const exited = (p: ChildProcess | undefined) => !p || p.exitCode !== null || p.signalCode !== null;
        if (left.length === 0 && exited(this.launcher) && exited(this.relayProc)) break;
        for (const p of left) signal(p, "SIGKILL");
        await Bun.sleep(10);
      }
      while (this.freezer && !this.freezer.remove() && Date.now() < deadline) await Bun.sleep(10);
      removeTree(this.o.dir);
    })());
  }
}

/** A namespaced sandbox whose PID 1 is gone: nothing may enter it or reach its root through /proc/<pid>. */
export class NamespaceEnded extends Error {}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    // ESRCH: gone already
  }
}
