// `stack.sh` (default): the whole control plane on loopback. A real kube-apiserver (the test peer, with its own
// PKI), the project's CRDs, two simulated sandboxd nodes each with its own vk-sandbox (registering an InternalIP
// so `kubectl logs`/`exec` reach its kubelet API), the example SandboxTemplate + SandboxWarmPool, and the parts
// that serve sandboxes to clients: sandbox-apiserver and sandbox-envd-proxy.
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { binary } from "./binary.ts";
import { startKubeApiserver } from "#tests/kube/harness.ts";
import { startSimulators, type StackContext, type StackExports } from "./mesh.ts";
import { isolationLine } from "#services/sandboxd-sim/sim.ts";
import { answers, waitFor } from "./supervisor.ts";
import { E2B_DOMAIN } from "./mesh.ts";
import { startAggregatedApiserver } from "./apiserver.ts";
import { BUILD_BASE_IMAGE, buildFlags, TEMPLATE_IMAGE } from "./files.ts";

export interface FullPorts {
  kubelet0: number;
  kubelet1: number;
  apiserver: number;
}

/** The e2b surface's flags, shared by sandbox-apiserver (with --enable-e2b-api) and what the proxy must agree on. */
function e2bArgs(files: StackContext["files"], port: number): string[] {
  return [
    "--enable-e2b-api",
    `--e2b-bind-address=127.0.0.1:${port}`,
    `--e2b-domain=${E2B_DOMAIN}`,
    `--e2b-envd-secret-file=${files.envdSecretFile}`,
    `--e2b-api-key-file=${files.apiKeyFile}`,
    `--e2b-template-alias-file=${files.aliasFile}`,
    ...buildFlags(files),
  ];
}

export const NODE_NAMES = ["sim-node-0", "sim-node-1"] as const;

export async function startFull(ctx: StackContext & { kubeletPorts: FullPorts }): Promise<StackExports> {
  const { files, sup, say, root } = ctx;
  say("kube-apiserver (real, with embedded etcd) …");
  // InternalIP first: `kubectl logs`/`exec` then dial 127.0.0.1 instead of the unresolvable node name.
  const cluster = await startKubeApiserver({ extraArgs: ["--kubelet-preferred-address-types=InternalIP,Hostname"] });
  sup.add("kube-apiserver", () => cluster.stop(), { last: true });
  say(`kube-apiserver ${cluster.url}`);
  const crdDir = join(root, "manifests", "crds");
  for (const f of readdirSync(crdDir).filter((f) => f.endsWith(".yaml")).sort()) await cluster.apply(readFileSync(join(crdDir, f), "utf8"));
  const kubeconfig = cluster.kubeconfig({ path: join(files.work, "kubeconfig") });

  say(`sandboxd simulators (development substrate, no VMs) on 127.0.0.1:${ctx.ports.node0}, 127.0.0.1:${ctx.ports.node1}`);
  say(isolationLine());
  const addrs = await startSimulators(ctx, false);

  const kubelets = [ctx.kubeletPorts.kubelet0, ctx.kubeletPorts.kubelet1];
  NODE_NAMES.forEach((node, i) => {
    say(`vk-sandbox ${node} → sandboxd ${addrs[i]}, kubelet API 127.0.0.1:${kubelets[i]}`);
    sup.spawn(`vk-sandbox-${i}`, [
      ...binary(root, "vk-sandbox"),
      `--node-name=${node}`,
      "--node-ip=127.0.0.1",
      `--listen-addr=127.0.0.1:${kubelets[i]}`,
      // kube-apiserver presents its kubelet client certificate for `kubectl logs`/`exec`; this CA verifies it.
      `--client-ca-file=${cluster.clientCaFile}`,
      `--sandboxd-url=http://${addrs[i]}`,
      `--sandboxd-token-file=${files.rootTokenFile}`,
      `--state-path=${join(files.work, `state-${i}`, "claims.json")}`,
      "--publish-inventory",
      "--publish-interval=2s",
    ], { KUBECONFIG: kubeconfig });
  });
  for (const node of NODE_NAMES) {
    await waitFor(`node ${node}`, async () => {
      const r = await cluster.adminFetch(`/api/v1/nodes/${node}`);
      if (r.status !== 200) return false;
      const n = (await r.json()) as { status?: { conditions?: { type: string; status: string }[] } };
      return n.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") ?? false;
    });
  }
  say(`sandbox-apiserver (aggregated API, warm-pool driver, e2b API :${ctx.ports.e2b}) on 127.0.0.1:${ctx.kubeletPorts.apiserver}, registered as APIService v1beta1.agents.x-k8s.io`);
  await startAggregatedApiserver({ root, cluster, kubeconfig, files, sup, port: ctx.kubeletPorts.apiserver, args: e2bArgs(files, ctx.ports.e2b) });
  say(`sandbox-envd-proxy on 127.0.0.1:${ctx.ports.proxy}`);
  sup.spawn("sandbox-envd-proxy", [
    ...binary(root, "sandbox-envd-proxy"),
    `--bind-address=127.0.0.1:${ctx.ports.proxy}`,
    `--domain=${E2B_DOMAIN}`,
    `--e2b-envd-secret-file=${files.envdSecretFile}`,
    `--sandboxd-token-file=${files.rootTokenFile}`,
  ], { KUBECONFIG: kubeconfig });
  await waitFor("the envd proxy", () => answers(`http://127.0.0.1:${ctx.ports.proxy}/healthz`, [200, 204]));
  await waitFor("the e2b API of sandbox-apiserver", () => answers(`http://127.0.0.1:${ctx.ports.e2b}/health`, [200, 204]));

  say("example SandboxTemplate + SandboxWarmPool (examples/warm-pool.yaml)");
  await cluster.apply(readFileSync(join(root, "examples", "warm-pool.yaml"), "utf8"));
  // A build claims at once (no retry), and a user's first few creates should not meet a pool still filling (503
  // "retry"), so "ready" waits until every node has published its pool filled to its target.
  await waitFor("every node's warm pool filled in its NodeInventory", async () => {
    const r = await cluster.adminFetch("/apis/sandbox.cocoonstack.io/v1beta1/nodeinventories");
    if (r.status !== 200) return false;
    const list = (await r.json()) as { items?: { pools?: { warm: number; target: number }[] }[] };
    const items = list.items ?? [];
    return items.length === NODE_NAMES.length && items.every((i) => (i.pools ?? []).some((p) => p.target > 0 && p.warm >= p.target));
  });

  return {
    lines: [
      `export KUBECONFIG=${kubeconfig}`,
      `export E2B_API_KEY=${files.apiKey}`,
      `export E2B_API_URL=http://127.0.0.1:${ctx.ports.e2b}`,
      `export E2B_SANDBOX_URL=http://127.0.0.1:${ctx.ports.proxy}`,
    ],
    // Each try-line is one whole command with absolute paths: it runs as printed from any directory, with no bun or
    // kubectl on PATH (scripts/bun, scripts/kubectl find the bootstrap's and the test peers'). The export lines first.
    notes: [
      `try: ${join(root, "scripts", "bun")} ${join(root, "examples", "hello.ts")} --keep`,
      `try: ${join(root, "scripts", "kubectl")} get sandboxes -A -o wide`,
      `try: ${join(root, "scripts", "kubectl")} apply -f ${join(root, "examples", "sandbox-pod.yaml")}`,
      `try: ${join(root, "scripts", "bun")} ${join(root, "examples", "build.ts")}`,
      `(hello.ts --keep leaves its sandbox for get sandboxes to list; the example Pod binds to ${NODE_NAMES[0]}; builds on, from "${BUILD_BASE_IMAGE}" = ${TEMPLATE_IMAGE}, uploads in ${files.buildDir})`,
    ],
  };
}
