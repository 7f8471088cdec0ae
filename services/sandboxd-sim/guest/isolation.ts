// sandboxd-sim guest — development substrate, not product code. See README.md in this folder.
//
// Which kind of sandbox this host can give: "namespaces" (namespace.ts: own mount/PID/IPC/UTS/network
// namespaces and an overlay root) needs util-linux's unshare/nsenter/setpriv, chroot, ip and overlayfs, and
// either root or, without root, unprivileged user namespaces that allow overlay mounts (Linux >= 5.11): then the
// sandbox also gets its own user namespace mapping the simulator's uid to root inside ("rootless", one uid only).
// Without them the guest falls back to the process sandbox (plain host child processes in a directory) and says
// so once per process.
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { simLog } from "../log.ts";
import { removeTree } from "./layer.ts";

/** `rootless`: each sandbox in its own user namespace where the simulator's uid is root (the simulator is not root). */
export type Isolation = { mode: "namespaces"; rootless?: true } | { mode: "process"; reason: string };

const TOOLS = ["unshare", "nsenter", "setpriv", "chroot", "ip", "mount", "cp"];

/** PATH for the tools above: a non-root user's PATH often lacks the sbin directories chroot and ip live in. */
export const toolEnv = (): NodeJS.ProcessEnv => {
  const path = (process.env.PATH ?? "").split(":").filter(Boolean);
  for (const d of ["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"]) if (!path.includes(d)) path.push(d);
  return { ...process.env, PATH: path.join(":") };
};

/** What `unshare` needs to give a sandbox its namespaces: as root nothing more; otherwise a user namespace of its own. */
export const userNamespaceArgs = (rootless: boolean | undefined): string[] => (rootless ? ["--user", "--map-root-user"] : []);

/** Does a namespace setup like namespace.ts's work here (an overlay over a host dir, lo up)? The error text if not. */
function probeMount(rootless: boolean): string | undefined {
  const dir = mkdtempSync(join(tmpdir(), "sandboxd-sim-probe-"));
  try {
    for (const d of ["u", "w", "m"]) mkdirSync(join(dir, d));
    const r = spawnSync("unshare", [...userNamespaceArgs(rootless), "--mount", "--pid", "--fork", "--uts", "--ipc", "--net", "--propagation", "private", "sh", "-c",
      `mount -t overlay overlay -o lowerdir=/usr,upperdir=${dir}/u,workdir=${dir}/w ${dir}/m && ip link set lo up`], { encoding: "utf8", timeout: 10_000, env: toolEnv() });
    return r.status === 0 ? undefined : (r.stderr || r.error?.message || `exit ${r.status}`).trim();
  } finally {
    removeTree(dir);
  }
}

function probe(): Isolation {
  if (process.platform !== "linux") return { mode: "process", reason: "not Linux" };
  for (const t of TOOLS) {
    if (spawnSync("sh", ["-c", `command -v ${t}`], { env: toolEnv() }).status !== 0) return { mode: "process", reason: `${t} not found` };
  }
  const root = process.getuid?.() === 0;
  const err = probeMount(!root);
  if (err === undefined) return root ? { mode: "namespaces" } : { mode: "namespaces", rootless: true };
  return {
    mode: "process",
    reason: root
      ? `namespaces or overlay mounts unavailable: ${err}`
      : `not root, and unprivileged user namespaces with overlay mounts are unavailable (kernel >= 5.11 and user.max_user_namespaces > 0 needed): ${err}`,
  };
}

let cached: Isolation | undefined;

/** The host's isolation, probed once per process; the first call logs which one the guests use and why. */
export function hostIsolation(): Isolation {
  if (cached) return cached;
  cached = probe();
  if (cached.mode === "namespaces") simLog().info({ guests: "namespaces", rootless: cached.rootless === true }, "guest sandboxes: own mount/PID/IPC/UTS/network namespaces and an overlay root (not a VM, not a security boundary)");
  else simLog().warn({ guests: "process", reason: cached.reason }, `guest sandboxes: FALLBACK to the process sandbox (${cached.reason}): commands run as plain host processes`);
  return cached;
}

/** One line for a startup banner (the standalone simulator, scripts/stack.sh): which sandboxes, and what they are not. */
export function isolationLine(i: Isolation = hostIsolation()): string {
  if (i.mode === "namespaces" && i.rootless) {
    return "guest sandboxes: own Linux namespaces (user, mount, PID, IPC, UTS; network on the none lane) and an overlay root each, rootless: one uid (the simulator's, root inside), so every user runs as it; not VMs, not a security boundary";
  }
  return i.mode === "namespaces"
    ? "guest sandboxes: own Linux namespaces (mount, PID, IPC, UTS; network on the none lane) and an overlay root each; root inside is the host's uid 0 with a bounded capability set (no chroot, mount or mknod: commands and build steps stay inside their root); not VMs, not a security boundary against the shared kernel"
    : `guest sandboxes: FALLBACK to process sandboxes (${i.reason}): commands run as plain host processes with the host's files and network`;
}
