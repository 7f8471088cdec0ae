// A single-node Kubernetes that runs Pods, for the tests that install the chart the way an operator does: the
// harness's kube-apiserver (bound to all addresses, advertising the node address so Pods reach it through the
// `kubernetes` Service), kube-controller-manager, kube-scheduler, CoreDNS (cluster zone only; NXDOMAIN for the
// rest), containerd + runc + the bridge CNI, kube-proxy (iptables) and kubelet v1.35.4. The network guards go in
// before anything starts (network.ts); teardown restores every host setting it changed (host-state.ts).
// Needs root; one per machine at a time (fixed bridge names and ranges). See tests/kube/README.md "A node".
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { corednsBinary } from "../coredns.ts";
import { startKubeApiserver, type TestCluster } from "../harness.ts";
import { nodeBinary } from "../peers.ts";
import { freePorts } from "../ports.ts";
import { startContainerd, type Containerd } from "./containerd.ts";
import { assertRunning, type Daemon, startDaemon } from "./daemon.ts";
import { CGROUP_ROOT, type HostSnapshot, restoreHost, snapshotHost } from "./host-state.ts";
import { clearLeftovers, type Guards, installGuards, NODE_NET } from "./network.ts";
import { pauseArchive } from "./pause.ts";

export const NODE_NAME = "sbx-node";

export interface NodeCluster {
  kube: TestCluster;
  kubeconfig: string;
  containerd: Containerd;
  guards: Guards;
  daemons: Daemon[];
  dir: string;
  /** Seconds from the call until the Node was Ready and CoreDNS answered. */
  startSeconds: number;
  stop(): Promise<string[]>;
}

/** Why this machine cannot run the node, or undefined. */
export function nodeProblem(): string | undefined {
  if (process.getuid?.() !== 0) return "the single-node cluster needs root (kubelet, containerd, iptables, bridges)";
  for (const tool of ["containerd", "runc", "ctr", "iptables", "ip", "gcc", "buildah"]) {
    if (Bun.which(tool) === null) return `${tool} is not installed (tests/kube/node/packages.ts installs it as root)`;
  }
  if (!existsSync("/usr/lib/cni/bridge")) return "the CNI plugins are not installed (Debian containernetworking-plugins)";
  return undefined;
}

async function waitFor<T>(what: string, timeoutMs: number, check: () => Promise<T | undefined>, daemons: Daemon[]): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    for (const d of daemons) assertRunning(d);
    try {
      const v = await check();
      if (v !== undefined) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`${what}: not after ${timeoutMs / 1000} s${last ? ` (last: ${(last as Error).message})` : ""}`);
    await Bun.sleep(250);
  }
}

export async function startNodeCluster(log: (line: string) => void = () => {}): Promise<NodeCluster> {
  const started = performance.now();
  const problem = nodeProblem();
  if (problem) throw new Error(problem);
  const [kubelet, kubeProxy, scheduler, kcm, coredns, pause] = await Promise.all([
    nodeBinary("kubelet"),
    nodeBinary("kube-proxy"),
    nodeBinary("kube-scheduler"),
    nodeBinary("kube-controller-manager"),
    corednsBinary(),
    pauseArchive(),
  ]);
  const dir = mkdtempSync(join(tmpdir(), "sbx-node-"));
  // A node killed outright earlier left its guards and bridges: gone before the snapshot, so they are not restored.
  await clearLeftovers();
  const snapshot: HostSnapshot = await snapshotHost();
  const daemons: Daemon[] = [];
  let kube: TestCluster | undefined;
  let containerd: Containerd | undefined;
  const stop = async (): Promise<string[]> => {
    for (const d of [...daemons].reverse()) await d.stop();
    await containerd?.stop();
    await kube?.stop();
    const problems = await restoreHost(snapshot, dir);
    rmSync(dir, { recursive: true, force: true });
    return problems;
  };
  try {
    const guards = await installGuards();
    log("guards installed");
    // What the bridge plugin and kube-proxy need; restoreHost puts the old values back.
    writeFileSync("/proc/sys/net/ipv4/ip_forward", "1");
    if (existsSync("/proc/sys/net/bridge/bridge-nf-call-iptables")) writeFileSync("/proc/sys/net/bridge/bridge-nf-call-iptables", "1");
    for (const h of ["cpu", "cpuacct", "cpuset", "memory", "devices", "freezer", "blkio", "pids", "systemd"]) {
      if (existsSync(`/sys/fs/cgroup/${h}`)) mkdirSync(`/sys/fs/cgroup/${h}/${CGROUP_ROOT}`, { recursive: true });
    }
    // cpuset children start with no CPUs or memory nodes: give the root the parent's.
    const cpuset = `/sys/fs/cgroup/cpuset/${CGROUP_ROOT}`;
    if (existsSync(cpuset)) {
      for (const f of ["cpuset.cpus", "cpuset.mems"]) writeFileSync(`${cpuset}/${f}`, await Bun.file(`/sys/fs/cgroup/cpuset/${f}`).text());
    }

    kube = await startKubeApiserver({
      bindAddress: "0.0.0.0",
      advertiseAddress: NODE_NET.nodeIp,
      extraArgs: ["--kubelet-preferred-address-types=InternalIP", "--endpoint-reconciler-type=lease"],
    });
    const kubeconfig = kube.kubeconfig();
    log(`kube-apiserver ${kube.url}`);

    const [kcmPort, schedPort, proxyHealth, proxyMetrics, kubeletPort, kubeletHealth] = freePorts(6) as [number, number, number, number, number, number];
    daemons.push(
      startDaemon(
        "kube-controller-manager",
        [
          kcm,
          `--kubeconfig=${kubeconfig}`,
          `--authentication-kubeconfig=${kubeconfig}`,
          `--authorization-kubeconfig=${kubeconfig}`,
          `--root-ca-file=${kube.servingCaFile}`,
          `--service-account-private-key-file=${kube.serviceAccountKeyFile}`,
          `--service-cluster-ip-range=${NODE_NET.serviceCidr}`,
          "--leader-elect=false",
          "--use-service-account-credentials=false",
          "--bind-address=127.0.0.1",
          `--secure-port=${kcmPort}`,
        ],
        join(dir, "kube-controller-manager.log"),
      ),
      startDaemon(
        "kube-scheduler",
        [scheduler, `--kubeconfig=${kubeconfig}`, `--authentication-kubeconfig=${kubeconfig}`, `--authorization-kubeconfig=${kubeconfig}`, "--leader-elect=false", "--bind-address=127.0.0.1", `--secure-port=${schedPort}`],
        join(dir, "kube-scheduler.log"),
      ),
    );

    const corefile = join(dir, "Corefile");
    writeFileSync(
      corefile,
      `${NODE_NET.clusterDomain}:53 {
    bind ${NODE_NET.nodeIp}
    kubernetes ${NODE_NET.clusterDomain} {
        kubeconfig ${kubeconfig}
        pods insecure
    }
    cache 5
}
.:53 {
    bind ${NODE_NET.nodeIp}
    template ANY ANY {
        rcode NXDOMAIN
    }
}
`,
    );
    daemons.push(startDaemon("coredns", [coredns, "-conf", corefile], join(dir, "coredns.log")));

    containerd = await startContainerd(dir);
    await containerd.importArchive(pause, "localhost/sbx-pause");
    log("containerd up, pause image imported");

    daemons.push(
      startDaemon(
        "kube-proxy",
        [
          kubeProxy,
          `--kubeconfig=${kubeconfig}`,
          "--proxy-mode=iptables",
          `--cluster-cidr=${NODE_NET.podRange}`,
          `--hostname-override=${NODE_NAME}`,
          `--bind-address=${NODE_NET.nodeIp}`,
          `--healthz-bind-address=127.0.0.1:${proxyHealth}`,
          `--metrics-bind-address=127.0.0.1:${proxyMetrics}`,
          "--conntrack-max-per-core=0",
          "--conntrack-tcp-timeout-established=0",
          "--conntrack-tcp-timeout-close-wait=0",
          `--nodeport-addresses=${NODE_NET.nodeIp}/32`,
        ],
        join(dir, "kube-proxy.log"),
      ),
    );

    const resolv = join(dir, "resolv.conf");
    writeFileSync(resolv, "");
    const kubeletConfig = join(dir, "kubelet.yaml");
    writeFileSync(
      kubeletConfig,
      JSON.stringify({
        apiVersion: "kubelet.config.k8s.io/v1beta1",
        kind: "KubeletConfiguration",
        address: NODE_NET.nodeIp,
        port: kubeletPort,
        readOnlyPort: 0,
        healthzBindAddress: "127.0.0.1",
        healthzPort: kubeletHealth,
        authentication: { anonymous: { enabled: false }, webhook: { enabled: true }, x509: { clientCAFile: kube.clientCaFile } },
        authorization: { mode: "Webhook" },
        cgroupDriver: "cgroupfs",
        cgroupRoot: `/${CGROUP_ROOT}`,
        failCgroupV1: false,
        failSwapOn: false,
        containerRuntimeEndpoint: `unix://${containerd.socket}`,
        clusterDNS: [NODE_NET.nodeIp],
        clusterDomain: NODE_NET.clusterDomain,
        resolvConf: resolv,
        // Containers' logs under the cluster's directory (removed with it), not the host's /var/log/pods.
        podLogsDir: join(dir, "pod-logs"),
        // Disk and memory pressure must not evict the chart's Pods on a test machine, nor GC its imported images.
        evictionHard: { "memory.available": "0%", "nodefs.available": "0%", "imagefs.available": "0%", "nodefs.inodesFree": "0%" },
        imageGCHighThresholdPercent: 100,
        imageGCLowThresholdPercent: 99,
        protectKernelDefaults: false,
        serializeImagePulls: false,
        maxPods: 60,
        syncFrequency: "10s",
        nodeStatusUpdateFrequency: "5s",
        fileCheckFrequency: "10s",
        shutdownGracePeriod: "0s",
      }),
    );
    daemons.push(
      startDaemon(
        "kubelet",
        [
          kubelet,
          `--config=${kubeletConfig}`,
          `--kubeconfig=${kubeconfig}`,
          `--root-dir=${join(dir, "kubelet")}`,
          `--cert-dir=${join(dir, "kubelet-pki")}`,
          `--hostname-override=${NODE_NAME}`,
          `--node-ip=${NODE_NET.nodeIp}`,
          "--v=1",
        ],
        join(dir, "kubelet.log"),
      ),
    );
    await waitFor(
      `Node ${NODE_NAME} Ready`,
      180_000,
      async () => {
        const r = await kube!.adminFetch(`/api/v1/nodes/${NODE_NAME}`);
        if (!r.ok) {
          await r.body?.cancel();
          return undefined;
        }
        const node = (await r.json()) as { status?: { conditions?: Array<{ type: string; status: string }> } };
        return node.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") ? true : undefined;
      },
      daemons,
    );
    log(`Node ${NODE_NAME} Ready`);
    return { kube, kubeconfig, containerd, guards, daemons, dir, startSeconds: (performance.now() - started) / 1000, stop };
  } catch (err) {
    const tails = daemons.map((d) => `--- ${d.name} ---\n${d.tail(15)}`).join("\n");
    const problems = await stop();
    throw new Error(`single-node cluster did not start: ${(err as Error).message}\n${tails}${problems.length ? `\nteardown: ${problems.join("; ")}` : ""}`);
  }
}
