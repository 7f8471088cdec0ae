// sandboxd-sim guest — development substrate, not product code. See README.md in this folder.
//
// Which kind of sandbox this host can give: "namespaces" (namespace.ts: own mount/PID/IPC/UTS/network
// namespaces and an overlay root) needs root, util-linux's unshare/nsenter/setpriv, chroot, ip and overlayfs;
// without them the guest falls back to the process sandbox (plain host child processes in a directory) and says
// so once per process. Unprivileged user namespaces are not used: a non-root simulator takes the fallback.
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { simLog } from "../log.ts";

export type Isolation = { mode: "namespaces" } | { mode: "process"; reason: string };

const TOOLS = ["unshare", "nsenter", "setpriv", "chroot", "ip", "mount", "cp"];

function probe(): Isolation {
  if (process.platform !== "linux") return { mode: "process", reason: "not Linux" };
  if (process.getuid?.() !== 0) return { mode: "process", reason: "not running as root (unprivileged user namespaces are not used)" };
  for (const t of TOOLS) {
    if (spawnSync("sh", ["-c", `command -v ${t}`]).status !== 0) return { mode: "process", reason: `${t} not found` };
  }
  const dir = mkdtempSync(join(tmpdir(), "sandboxd-sim-probe-"));
  try {
    for (const d of ["u", "w", "m"]) mkdirSync(join(dir, d));
    const r = spawnSync("unshare", ["--mount", "--pid", "--fork", "--uts", "--ipc", "--net", "--propagation", "private", "sh", "-c",
      `mount -t overlay overlay -o lowerdir=/usr,upperdir=${dir}/u,workdir=${dir}/w ${dir}/m && ip link set lo up`], { encoding: "utf8", timeout: 10_000 });
    if (r.status !== 0) return { mode: "process", reason: `namespaces or overlay mounts unavailable: ${(r.stderr || r.error?.message || `exit ${r.status}`).trim()}` };
    return { mode: "namespaces" };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

let cached: Isolation | undefined;

/** The host's isolation, probed once per process; the first call logs which one the guests use and why. */
export function hostIsolation(): Isolation {
  if (cached) return cached;
  cached = probe();
  if (cached.mode === "namespaces") simLog().info({ guests: "namespaces" }, "guest sandboxes: own mount/PID/IPC/UTS/network namespaces and an overlay root (not a VM, not a security boundary)");
  else simLog().warn({ guests: "process", reason: cached.reason }, `guest sandboxes: FALLBACK to the process sandbox (${cached.reason}): commands run as plain host processes`);
  return cached;
}

/** One line for a startup banner (the standalone simulator, scripts/stack.sh): which sandboxes, and what they are not. */
export function isolationLine(i: Isolation = hostIsolation()): string {
  return i.mode === "namespaces"
    ? "guest sandboxes: own Linux namespaces (mount, PID, IPC, UTS; network on the none lane) and an overlay root each; not VMs, not a security boundary"
    : `guest sandboxes: FALLBACK to process sandboxes (${i.reason}): commands run as plain host processes with the host's files and network`;
}
