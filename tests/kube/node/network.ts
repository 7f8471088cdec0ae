// The single-node cluster's addresses, and the guards that keep every packet on this machine. Installed before
// anything of the cluster starts, removed (with everything else the cluster changed) at teardown:
// - the node address on an empty bridge (the kernel here has no dummy interface);
// - routes: the service range onto that empty bridge, and the node and pod ranges beyond what is in use
//   unreachable, so a packet the cluster addresses there never takes the default route;
// - iptables chain SBX-GUARD (filter OUTPUT and FORWARD, first): anything still addressed to the service range after
//   kube-proxy's NAT (a Service not yet programmed) is rejected, and Pods may reach only Pods, Services and the node;
// - chain SBX-LEAK (mangle POSTROUTING): counts any packet from or to the cluster's ranges leaving by the default
//   route's interface. Its counters must read zero; the test reads them.
import { run, succeeded } from "#tests/support/run.ts";

export const NODE_NET = {
  nodeBridge: "sbx-node0",
  nodeIp: "10.90.0.1",
  nodeRange: "10.90.0.0/16",
  cniBridge: "sbx-cni0",
  podCidr: "10.91.0.0/24",
  podGateway: "10.91.0.1",
  podRange: "10.91.0.0/16",
  serviceCidr: "10.96.0.0/16",
  clusterDomain: "cluster.local",
} as const;

export async function sh(argv: string[], what = argv.join(" ")): Promise<string> {
  return succeeded(what, await run(argv, { timeoutMs: 60_000 }));
}

/** The interface of the default route, or undefined (a machine with none has nowhere to leak to). */
export async function uplink(): Promise<string | undefined> {
  const r = await run(["ip", "-o", "route", "show", "default"]);
  return /\bdev (\S+)/.exec(r.stdout)?.[1];
}

const GUARD_RULES = (n = NODE_NET) => [
  // Link-local multicast (224.0.0.0/24, never routed): the bridge's own IGMP reports, seen in the kernel log.
  ["-d", "224.0.0.0/24", "-j", "RETURN"],
  // After kube-proxy's DNAT a Service address means "not programmed yet": refuse instead of routing it anywhere.
  ["-d", n.serviceCidr, "-m", "comment", "--comment", "sbx: unprogrammed service", "-j", "REJECT"],
  ["-s", n.podRange, "-d", n.podRange, "-j", "RETURN"],
  ["-s", n.podRange, "-d", n.nodeIp, "-j", "RETURN"],
  ["-s", n.podRange, "-m", "comment", "--comment", "sbx: pod egress beyond pods, services and the node", "-j", "REJECT"],
];

export interface Guards {
  /** Packets the guard chain rejected, by rule comment; and packets counted leaving by the uplink (must be 0). */
  counters(): Promise<{ rejected: Record<string, number>; leaked: number; uplink: string | undefined }>;
}

/**
 * What a node killed outright (SIGKILL, a crashed runner) left of its guards and bridges: removed before a new
 * node installs its own, so a start never fails on "already exists". Errors mean "not there" and are ignored.
 */
export async function clearLeftovers(): Promise<void> {
  const n = NODE_NET;
  for (const [table, chain, hook] of [["filter", "SBX-GUARD", "OUTPUT"], ["filter", "SBX-GUARD", "FORWARD"], ["mangle", "SBX-LEAK", "POSTROUTING"]] as const) {
    while ((await run(["iptables", "-w", "-t", table, "-D", hook, "-j", chain])).code === 0) {}
  }
  for (const [table, chain] of [["filter", "SBX-GUARD"], ["mangle", "SBX-LEAK"]] as const) {
    await run(["iptables", "-w", "-t", table, "-F", chain]);
    await run(["iptables", "-w", "-t", table, "-X", chain]);
  }
  for (const route of [n.serviceCidr, n.podRange, n.nodeRange]) await run(["ip", "route", "del", route]);
  for (const link of [n.nodeBridge, n.cniBridge]) await run(["ip", "link", "delete", link]);
}

export async function installGuards(): Promise<Guards> {
  const n = NODE_NET;
  await clearLeftovers();
  await sh(["ip", "link", "add", n.nodeBridge, "type", "bridge"]);
  await sh(["ip", "addr", "add", `${n.nodeIp}/32`, "dev", n.nodeBridge]);
  await sh(["ip", "link", "set", n.nodeBridge, "up"]);
  await sh(["ip", "route", "add", n.serviceCidr, "dev", n.nodeBridge]);
  await sh(["ip", "route", "add", "unreachable", n.podRange]);
  await sh(["ip", "route", "add", "unreachable", n.nodeRange]);
  await sh(["iptables", "-w", "-N", "SBX-GUARD"]);
  for (const rule of GUARD_RULES()) {
    if (rule.includes("sbx: pod egress beyond pods, services and the node")) {
      // Best effort: what was refused, in the kernel log (dmesg), for a test to show; the REJECT holds without it.
      await run(["iptables", "-w", "-A", "SBX-GUARD", "-s", n.podRange, "-m", "limit", "--limit", "20/min", "-j", "LOG", "--log-prefix", "sbx-pod-egress: "]);
    }
    await sh(["iptables", "-w", "-A", "SBX-GUARD", ...rule]);
  }
  await sh(["iptables", "-w", "-I", "OUTPUT", "1", "-j", "SBX-GUARD"]);
  await sh(["iptables", "-w", "-I", "FORWARD", "1", "-j", "SBX-GUARD"]);
  const out = await uplink();
  await sh(["iptables", "-w", "-t", "mangle", "-N", "SBX-LEAK"]);
  if (out) {
    for (const [flag, range] of [["-s", n.podRange], ["-d", n.podRange], ["-d", n.serviceCidr], ["-s", n.nodeRange], ["-d", n.nodeRange]] as const) {
      await sh(["iptables", "-w", "-t", "mangle", "-A", "SBX-LEAK", "-o", out, flag, range, "-m", "comment", "--comment", `sbx-leak ${flag} ${range}`, "-j", "DROP"]);
    }
  }
  await sh(["iptables", "-w", "-t", "mangle", "-I", "POSTROUTING", "1", "-j", "SBX-LEAK"]);
  return { counters: readGuardCounters };
}

/** The guards' counters (readable by any process on the machine while the node runs). */
export async function readGuardCounters(): Promise<{ rejected: Record<string, number>; leaked: number; uplink: string | undefined }> {
  const rejected: Record<string, number> = {};
  for (const line of (await sh(["iptables", "-w", "-L", "SBX-GUARD", "-v", "-x", "-n"])).split("\n")) {
    const m = /^\s*(\d+)\s+\d+\s+REJECT\b.*\/\* (sbx: [^*]+?) \*\//.exec(line);
    if (m) rejected[m[2]!] = Number(m[1]);
  }
  let leaked = 0;
  for (const line of (await sh(["iptables", "-w", "-t", "mangle", "-L", "SBX-LEAK", "-v", "-x", "-n"])).split("\n")) {
    const m = /^\s*(\d+)\s+\d+\s+DROP\b/.exec(line);
    if (m) leaked += Number(m[1]);
  }
  return { rejected, leaked, uplink: await uplink() };
}
