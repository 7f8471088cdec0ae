// The local stack (README "The two commands"): `bash scripts/stack.sh` starts the whole control plane on loopback;
// `--mesh` starts the lighter variant with no Kubernetes. Progress lines while it starts, then the exact lines to
// export, then it runs until Ctrl-C, which stops every part (no process, no temp dir left behind).
// Parts: scripts/stack/{mesh,full}.ts; ports (fixed, overridable): scripts/stack/ports.ts.
import { rmSync } from "node:fs";
import { join } from "node:path";
import { prepareFiles } from "./stack/files.ts";
import { checkPortsFree, PortError, PortValueError, type PortName } from "./stack/ports.ts";
import { startMesh, type StackExports } from "./stack/mesh.ts";
import { startFull } from "./stack/full.ts";
import { startClusterStack } from "./stack/cluster.ts";
import { Supervisor } from "./stack/supervisor.ts";

const USAGE = `usage: bash scripts/stack.sh [--mesh | --cluster]

  (no flag)  the full stack: kube-apiserver, two simulated nodes each with vk-sandbox, and the control plane
  --mesh     the lighter stack: two simulated nodes and sandbox-e2b with the envd proxy in-process, no Kubernetes
  --cluster  as it ships: a real single-node Kubernetes (kubelet, containerd; root), the images built from the
             working tree, the chart installed with them, two simulated nodes with vk-sandbox beside it
             (STACK_IMAGES_DIR/STACK_IMAGES_TAG: use images already built by scripts/images.sh)

Ports (127.0.0.1; override with the variable): STACK_E2B_PORT 3280, STACK_PROXY_PORT 3281, STACK_NODE0_PORT 7780,
STACK_NODE1_PORT 7781, STACK_KUBELET0_PORT 10260, STACK_KUBELET1_PORT 10261, STACK_APISERVER_PORT 3443.
State (API key, logs of the last run): STACK_STATE_DIR, default $SANDBOX_CACHE/stack.
The sandboxes are Linux namespaces with an overlay root on this machine as root, else process sandboxes (the
startup says which; services/sandboxd-sim/guest/README.md); never VMs, never a security boundary.`;

const root = join(import.meta.dir, "..");
const started = performance.now();
const say = (line: string) => process.stdout.write(`stack: ${line}\n`);
const secs = () => ((performance.now() - started) / 1000).toFixed(1);

async function main(argv: string[]): Promise<number> {
  const unknown = argv.filter((a) => a !== "--mesh" && a !== "--cluster");
  if (unknown.includes("--help") || unknown.includes("-h")) {
    console.log(USAGE);
    return 0;
  }
  if (unknown.length) {
    console.error(`stack: unknown argument ${JSON.stringify(unknown[0])}\n${USAGE}`);
    return 2;
  }
  const mesh = argv.includes("--mesh");
  const cluster = argv.includes("--cluster");
  if (mesh && cluster) {
    console.error(`stack: --mesh and --cluster are different stacks: choose one\n${USAGE}`);
    return 2;
  }
  // The cluster stack's clients use the Services' cluster IPs, and its nodes the node address: no fixed port.
  const needed: PortName[] = cluster ? [] : mesh ? ["e2b", "proxy", "node0", "node1"] : ["e2b", "proxy", "node0", "node1", "kubelet0", "kubelet1", "apiserver"];
  let ports: Record<PortName, number>;
  try {
    ports = await checkPortsFree(needed);
  } catch (e) {
    if (e instanceof PortError) {
      console.error(`stack: ${e.message}`);
      return e instanceof PortValueError ? 2 : 1;
    }
    throw e;
  }

  const files = prepareFiles();
  const sup = new Supervisor(files.logDir);
  // One stop, however many callers: a child dying while the start is still running and the start then failing
  // both ask; the second waits for the first instead of exiting mid-teardown (the cluster stack restores the host).
  let stopping: Promise<never> | undefined;
  const stop = (code: number): Promise<never> =>
    (stopping ??= (async () => {
      say("stopping …");
      await sup.stopAll();
      rmSync(files.work, { recursive: true, force: true });
      say("stopped");
      process.exit(code);
    })());
  // Ctrl-C, a kill, or the terminal closing: the same clean stop.
  for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"] as const) process.on(sig, () => void stop(0));
  sup.onChildDied = (name, code, logTail) => {
    console.error(`stack: ${name} exited (code ${code}); its log ${sup.logOf(name)} ends with:\n${logTail}`);
    void stop(1);
  };

  say(`${mesh ? "mesh stack (no Kubernetes)" : cluster ? "cluster stack (the chart on a real node)" : "full stack"}; temp dir ${files.work} (removed on stop), logs in ${files.logDir}`);
  if (files.apiKeyCreated) say(`generated an e2b API key at first start: ${join(files.stateDir, "e2b-api-key")}`);
  let exports: StackExports;
  try {
    const ctx = { root, files, sup, ports, say: (l: string) => say(`[${secs()} s] ${l}`) };
    exports = mesh ? await startMesh(ctx) : cluster ? await startClusterStack(ctx) : await startFull({ ...ctx, kubeletPorts: ports });
  } catch (e) {
    console.error(`stack: start failed: ${(e as Error).message}`);
    return stop(1);
  }
  say(`ready in ${secs()} s. Paste these lines into your shell:`);
  for (const l of exports.lines) process.stdout.write(`${l}\n`);
  for (const n of exports.notes) say(n);
  say("Ctrl-C stops everything");
  return new Promise<number>(() => {}); // runs until a signal
}

process.exitCode = await main(process.argv.slice(2));
