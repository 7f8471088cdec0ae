// containerd (Debian's 1.6) for the single-node cluster: its own root, state and socket under the cluster's
// directory, runc through the v2 shim, the bridge CNI from Debian's containernetworking-plugins, cgroupfs, and
// restrict_oom_score_adj (root here lacks CAP_SYS_RESOURCE, so a container may not lower its OOM score). Images are
// imported with ctr into the CRI namespace; nothing is ever pulled.
import { mkdirSync, openSync, closeSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Subprocess } from "bun";
import { run } from "#tests/support/run.ts";
import { NODE_NET, sh } from "./network.ts";
import { PAUSE_IMAGE } from "./pause.ts";

export const CNI_BIN = "/usr/lib/cni";

export interface Containerd {
  socket: string;
  proc: Subprocess;
  ctr(args: string[]): Promise<string>;
  /** Imports an OCI archive as `name:tag` (the archive's ref names the tag). */
  importArchive(archive: string, baseName: string): Promise<void>;
  /** Kills every task in the CRI namespace, then containerd. */
  stop(): Promise<void>;
}

export async function startContainerd(dir: string): Promise<Containerd> {
  const root = join(dir, "containerd");
  const cniConf = join(root, "cni-conf");
  for (const d of [root, cniConf]) mkdirSync(d, { recursive: true });
  const socket = join(root, "containerd.sock");
  writeFileSync(
    join(cniConf, "10-sbx.conflist"),
    JSON.stringify({
      cniVersion: "1.0.0",
      name: "sbx",
      plugins: [
        {
          type: "bridge",
          bridge: NODE_NET.cniBridge,
          isGateway: true,
          // No masquerade: a Pod's packets keep their address, and the guards refuse any not for the cluster.
          ipMasq: false,
          hairpinMode: true,
          ipam: {
            type: "host-local",
            ranges: [[{ subnet: NODE_NET.podCidr, gateway: NODE_NET.podGateway }]],
            routes: [{ dst: "0.0.0.0/0" }],
            dataDir: join(root, "cni-ipam"),
          },
        },
        { type: "portmap", capabilities: { portMappings: true } },
      ],
    }),
  );
  const config = `version = 2
root = "${join(root, "root")}"
state = "${join(root, "state")}"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "${socket}"

[ttrpc]
  address = "${socket}.ttrpc"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "${PAUSE_IMAGE}"
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  max_container_log_line_size = 16384
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "/usr/sbin/runc"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "${CNI_BIN}"
    conf_dir = "${cniConf}"
`;
  const configFile = join(root, "config.toml");
  writeFileSync(configFile, config);
  const log = openSync(join(dir, "containerd.log"), "w");
  let proc: Subprocess;
  try {
    proc = Bun.spawn(["containerd", "--config", configFile, "--log-level", "info"], { stdio: ["ignore", log, log], detached: true });
  } finally {
    closeSync(log);
  }
  const ctr = (args: string[]) => sh(["ctr", "--address", socket, "--namespace", "k8s.io", ...args], `ctr ${args.join(" ")}`);
  const deadline = Date.now() + 60_000;
  for (;;) {
    const r = await run(["ctr", "--address", socket, "version"], { timeoutMs: 10_000 });
    if (r.code === 0) break;
    if (proc.exitCode !== null) throw new Error(`containerd exited ${proc.exitCode} (see ${join(dir, "containerd.log")})`);
    if (Date.now() > deadline) throw new Error(`containerd did not answer on ${socket} in 60 s: ${r.stderr.trim()}`);
    await Bun.sleep(200);
  }
  return {
    socket,
    proc,
    ctr,
    async importArchive(archive, baseName) {
      await ctr(["images", "import", "--base-name", baseName, "--no-unpack=false", archive]);
    },
    async stop() {
      const tasks = await run(["ctr", "--address", socket, "--namespace", "k8s.io", "tasks", "list", "-q"], { timeoutMs: 30_000 });
      for (const id of tasks.stdout.split("\n").filter(Boolean)) {
        await run(["ctr", "--address", socket, "--namespace", "k8s.io", "tasks", "kill", "-s", "SIGKILL", id], { timeoutMs: 30_000 });
        await run(["ctr", "--address", socket, "--namespace", "k8s.io", "tasks", "delete", "-f", id], { timeoutMs: 30_000 });
      }
      try {
        process.kill(-proc.pid, "SIGTERM");
      } catch {}
      const killed = await Promise.race([proc.exited.then(() => true), Bun.sleep(15_000).then(() => false)]);
      if (!killed) {
        try {
          process.kill(-proc.pid, "SIGKILL");
        } catch {}
        await proc.exited;
      }
      // Shims outlive containerd by design; ours are found by the socket they were given.
      await run(["pkill", "-9", "-f", `containerd-shim-runc-v2 .*-address ${socket}`]);
    },
  };
}
