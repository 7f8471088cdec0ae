// The local stack: a real kube-apiserver on loopback, a sandboxd simulator node (a development substrate:
// real sandboxd needs KVM), and vk-sandbox registered against both as a virtual node. It runs until Ctrl-C.
// The aggregated apiserver, the e2b surface and the envd proxy join here as they are built.
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startSandboxdSim } from "../services/sandboxd-sim/sim.ts";
import { startKubeApiserver } from "../tests/kube/harness.ts";

const root = join(import.meta.dir, "..");
const nodeName = process.env.STACK_NODE_NAME ?? "vk-sandboxd";
const pools = (process.env.STACK_POOLS ?? "base:24.04/none/small=5").split(",").filter(Boolean);

const say = (line: string) => process.stdout.write(`stack: ${line}\n`);

const cluster = await startKubeApiserver();
say(`kube-apiserver ${cluster.url}`);
const crdDir = join(root, "manifests", "crds");
for (const f of readdirSync(crdDir).filter((f) => f.endsWith(".yaml"))) {
  await cluster.apply(readFileSync(join(crdDir, f), "utf8"));
}

const rootToken = process.env.STACK_SANDBOXD_TOKEN ?? "stack-root-token";
const sim = await startSandboxdSim({ rootToken, pools, port: Number(process.env.STACK_SANDBOXD_PORT ?? 0) });
say(`sandboxd simulator (development substrate) ${sim.url} pools ${pools.join(" ")}`);

const work = mkdtempSync(join(tmpdir(), "sandbox-stack-"));
const tokenFile = join(work, "sandboxd-token");
writeFileSync(tokenFile, `${rootToken}\n`, { mode: 0o600 });
const kubeconfig = cluster.kubeconfig({ path: join(work, "kubeconfig") });

const vk = Bun.spawn(
  [
    "bun", join(root, "services", "vk-sandbox", "main.ts"),
    `--node-name=${nodeName}`,
    `--listen-addr=127.0.0.1:${process.env.STACK_KUBELET_PORT ?? "10260"}`,
    `--sandboxd-url=${sim.url}`,
    `--sandboxd-token-file=${tokenFile}`,
    `--state-path=${join(work, "state", "claims.json")}`,
    "--publish-inventory",
    "--publish-interval=5s",
  ],
  { env: { ...process.env, KUBECONFIG: kubeconfig }, stdio: ["ignore", "inherit", "inherit"] },
);

say(`vk-sandbox pid ${vk.pid}, node ${nodeName}, state ${join(work, "state", "claims.json")}`);
say(`export KUBECONFIG=${kubeconfig}`);
say(`try: a Pod with spec.nodeName=${nodeName}, annotation sandbox.cocoonstack.io/template=base:24.04`);
say("Ctrl-C stops everything");

let stopping = false;
async function stop(code: number): Promise<never> {
  if (!stopping) {
    stopping = true;
    vk.kill("SIGTERM");
    await vk.exited;
    await sim.stop();
    await cluster.stop();
    // The token file, kubeconfig and claim state name a simulator and a cluster that no longer exist.
    rmSync(work, { recursive: true, force: true });
  }
  process.exit(code);
}
process.on("SIGINT", () => void stop(0));
process.on("SIGTERM", () => void stop(0));
const vkCode = await vk.exited;
if (!stopping) {
  say(`vk-sandbox exited with ${vkCode}`);
  await stop(1);
}
