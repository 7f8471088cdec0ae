// What the single-node cluster changes on the host, saved before it starts and put back at teardown: the sysctls
// kubelet, kube-proxy and the bridge plugin write, every iptables table (kubelet's, kube-proxy's and the CNI's chains
// and the guards go with the restore), the links, routes and network namespaces it made, and the mounts under its
// directory. A teardown never throws: each step is tried and what failed is returned, for the log.
import { existsSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { run } from "#tests/support/run.ts";

const CGROUP_FS = "/sys/fs/cgroup";
/** kubelet's --cgroup-root: every cgroup the node makes is under it, so teardown knows what to remove. */
export const CGROUP_ROOT = "sbx-node";

const SYSCTLS = [
  "net/ipv4/ip_forward",
  "net/ipv4/conf/all/route_localnet",
  "net/bridge/bridge-nf-call-iptables",
  "net/bridge/bridge-nf-call-ip6tables",
  "vm/overcommit_memory",
  "vm/panic_on_oom",
  "kernel/panic",
  "kernel/panic_on_oops",
  "kernel/keys/root_maxkeys",
  "kernel/keys/root_maxbytes",
  "net/netfilter/nf_conntrack_max",
  "net/netfilter/nf_conntrack_tcp_timeout_established",
  "net/netfilter/nf_conntrack_tcp_timeout_close_wait",
];

export interface HostSnapshot {
  sysctls: Map<string, string>;
  iptables: string;
  ip6tables: string;
  links: Set<string>;
  netns: Set<string>;
}

const read = (p: string) => {
  try {
    return readFileSync(`/proc/sys/${p}`, "utf8").trim();
  } catch {
    return undefined;
  }
};

async function names(argv: string[]): Promise<Set<string>> {
  const r = await run(argv);
  return new Set(r.stdout.split("\n").map((l) => l.split(/[\s:@]+/).filter(Boolean)[0] ?? "").filter(Boolean));
}

export async function snapshotHost(): Promise<HostSnapshot> {
  const sysctls = new Map<string, string>();
  for (const s of SYSCTLS) {
    const v = read(s);
    if (v !== undefined) sysctls.set(s, v);
  }
  return {
    sysctls,
    iptables: (await run(["iptables-save"])).stdout,
    ip6tables: (await run(["ip6tables-save"])).stdout,
    links: new Set(await linkNames()),
    netns: await names(["ip", "netns", "list"]),
  };
}

async function linkNames(): Promise<string[]> {
  const r = await run(["ip", "-o", "link", "show"]);
  return r.stdout.split("\n").map((l) => /^\d+:\s+([^:@\s]+)/.exec(l)?.[1]).filter((x): x is string => !!x);
}

/** Puts the host back as `snap` found it; unmounts and leaves removal of `dir` to the caller. */
export async function restoreHost(snap: HostSnapshot, dir: string): Promise<string[]> {
  const problems: string[] = [];
  const attempt = async (what: string, argv: string[], opts: { stdin?: string } = {}) => {
    const r = await run(argv, { timeoutMs: 60_000, ...opts });
    if (r.code !== 0) problems.push(`${what}: ${(r.stderr || r.stdout).trim().split("\n")[0]}`);
  };
  // Pod network namespaces (the CNI's cni-…), then the links they held.
  const before = snap.netns;
  for (const ns of await names(["ip", "netns", "list"])) if (!before.has(ns)) await attempt(`netns ${ns}`, ["ip", "netns", "delete", ns]);
  const links = await linkNames();
  for (const l of links) {
    if (snap.links.has(l) || !(l.startsWith("sbx-") || l.startsWith("veth"))) continue;
    const r = await run(["ip", "link", "delete", l]);
    // A veth goes with its namespace's other end, sometimes between the listing and here.
    if (r.code !== 0 && !/Cannot find device/.test(r.stderr)) problems.push(`link ${l}: ${r.stderr.trim()}`);
  }
  for (const route of ["10.96.0.0/16", "10.91.0.0/16", "10.90.0.0/16"]) await run(["ip", "route", "del", route]);
  // iptables-restore (nft) neither touches a table its input does not name nor deletes chains its input does not
  // declare: every table is emptied of rules and user chains first, then put back exactly as the snapshot had it.
  for (const [save, restore, dump] of [["iptables", "iptables-restore", snap.iptables], ["ip6tables", "ip6tables-restore", snap.ip6tables]] as const) {
    for (const table of ["filter", "nat", "mangle", "raw"]) {
      await run([save, "-w", "-t", table, "-F"]);
      await run([save, "-w", "-t", table, "-X"]);
    }
    await attempt(restore, [restore, "-w"], { stdin: dump });
  }
  for (const [k, v] of snap.sysctls) {
    try {
      if (read(k) !== v) writeFileSync(`/proc/sys/${k}`, v);
    } catch (err) {
      problems.push(`sysctl ${k}: ${(err as Error).message}`);
    }
  }
  // Mounts under the cluster's directory (overlay snapshots, tmpfs volumes, shm), deepest first.
  const mounts = readFileSync("/proc/self/mounts", "utf8")
    .split("\n")
    .map((l) => l.split(" ")[1]?.replace(/\\040/g, " "))
    .filter((m): m is string => !!m && (m.startsWith(`${dir}/`) || m === dir))
    .sort((a, b) => b.length - a.length);
  for (const m of mounts) await attempt(`umount ${m}`, ["umount", "-l", m]);
  // kubelet's cgroups (its cgroupRoot), deepest first, in every hierarchy.
  for (const hierarchy of readdirSync(CGROUP_FS)) {
    const top = join(CGROUP_FS, hierarchy, CGROUP_ROOT);
    if (!existsSync(top)) continue;
    const dirs = (await run(["find", top, "-depth", "-type", "d"])).stdout.split("\n").filter(Boolean);
    for (const d of dirs) {
      try {
        rmdirSync(d);
      } catch (err) {
        problems.push(`cgroup ${d}: ${(err as Error).message}`);
        break;
      }
    }
  }
  return problems;
}
