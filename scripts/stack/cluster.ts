// `stack.sh --cluster`: the closest thing to production on one machine. A real single-node Kubernetes that runs Pods
// (tests/kube/node/: kubelet, containerd, kube-proxy, CoreDNS, the controllers, behind network guards), the images
// built from the working tree (scripts/images.sh), the chart installed with them (certManager.enabled=false: the
// serving Secret and caBundle made here), and two simulated sandboxd nodes with their vk-sandbox beside the cluster,
// on the node address so the chart's Pods reach them. The tests of the chart on a kubelet
// (tests/e2e/cluster/chart.test.ts) start the same thing through installRelease.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { isolationLine, startSimCluster } from "#services/sandboxd-sim/sim.ts";
import { startNodeCluster, type NodeCluster } from "#tests/kube/node/cluster.ts";
import { NODE_NET } from "#tests/kube/node/network.ts";
import { kubectl } from "#tests/kube/kubectl.ts";
import { helmBinary } from "#tests/kube/peers.ts";
import { freePorts } from "#tests/kube/ports.ts";
import { run, type RunResult, succeeded } from "#tests/support/run.ts";
import { aggregatedServingCert } from "./aggregation.ts";
import { binary } from "./binary.ts";
import { ALIASES, type StackFiles } from "./files.ts";
import { E2B_DOMAIN, POOL, WARM_PER_NODE, type StackExports } from "./mesh.ts";
import { answers, type Supervisor, waitFor } from "./supervisor.ts";

export const RELEASE = "sandbox-operator";
export const RELEASE_NAMESPACE = "sandbox-system";
export const SIM_NODES = ["sim-node-0", "sim-node-1"] as const;

export interface Release {
  node: NodeCluster;
  kubeconfig: string;
  /** The values helm was given (a later upgrade passes them again with a new tag). */
  values: Record<string, unknown>;
  e2bUrl: string;
  proxyUrl: string;
  caBundle: string;
  /** helm with the release's kubeconfig; `values` go on stdin. */
  helm(args: string[], values?: Record<string, unknown>): Promise<string>;
}

export interface ReleaseOptions {
  root: string;
  files: StackFiles;
  sup: Supervisor;
  say(line: string): void;
  /** OCI archives of the images (scripts/images.sh output dir) and their tag. */
  images: { dir: string; tag: string };
}

/** Values for the chart with the working tree's images, e2b on, certManager off. */
function releaseValues(tag: string, caBundle: string): Record<string, unknown> {
  return {
    apiserver: {
      image: { repository: "localhost/sandbox-apiserver", tag },
      sandboxdToken: { secretName: "sandboxd-token" },
      e2b: {
        enabled: true,
        domain: E2B_DOMAIN,
        apiKeySecret: { name: "e2b-api-keys" },
        envdSecret: { secretName: "e2b-envd-secret" },
        templateAliases: ALIASES,
      },
    },
    envdProxy: { image: { repository: "localhost/sandbox-envd-proxy", tag } },
    certManager: { enabled: false, caBundle },
  };
}

const must = async (what: string, p: Promise<RunResult>): Promise<string> => succeeded(what, await p);

async function clusterIp(kubeconfig: string, service: string): Promise<string> {
  const out = await must(`Service ${service}`, kubectl(["-n", RELEASE_NAMESPACE, "get", "service", service, "-o", "jsonpath={.spec.clusterIP}"], { kubeconfig }));
  return out.trim();
}

export async function installRelease(o: ReleaseOptions): Promise<Release> {
  const { files, sup, say, root } = o;
  say("single-node Kubernetes (kubelet, containerd, kube-proxy, CoreDNS, controllers) behind network guards …");
  const node = await startNodeCluster(say);
  sup.add("single-node cluster", async () => {
    const problems = await node.stop();
    if (problems.length) say(`teardown: ${problems.join("; ")}`);
  }, { last: true });
  const kubeconfig = node.kubeconfig;
  say(`Node Ready in ${node.startSeconds.toFixed(0)} s; importing the images (${o.images.tag})`);
  say(`containerd: ctr --address ${node.containerd.socket} --namespace k8s.io images ls`);
  for (const image of ["sandbox-apiserver", "sandbox-envd-proxy"]) {
    await node.containerd.importArchive(join(o.images.dir, `${image}.oci.tar`), `localhost/${image}`);
  }

  const crdDir = join(root, "manifests", "crds");
  for (const f of readdirSync(crdDir).filter((f) => f.endsWith(".yaml")).sort()) await node.kube.apply(readFileSync(join(crdDir, f), "utf8"));
  await node.kube.createNamespace(RELEASE_NAMESPACE);
  const { ca, serving } = await aggregatedServingCert("sandbox-apiserver", RELEASE_NAMESPACE, "sandbox-cluster-stack-ca");
  const b64 = (s: string) => Buffer.from(s).toString("base64");
  const secret = (name: string, data: Record<string, string>, type = "Opaque") => ({
    apiVersion: "v1",
    kind: "Secret",
    type,
    metadata: { name, namespace: RELEASE_NAMESPACE },
    data: Object.fromEntries(Object.entries(data).map(([k, v]) => [k, b64(v)])),
  });
  await node.kube.apply([
    secret("sandbox-apiserver-serving-certs", { "tls.crt": serving.certPem, "tls.key": serving.keyPem }, "kubernetes.io/tls"),
    secret("e2b-api-keys", { keys: readFileSync(files.apiKeyFile, "utf8") }),
    secret("e2b-envd-secret", { secret: readFileSync(files.envdSecretFile, "utf8") }),
    secret("sandboxd-token", { token: readFileSync(files.rootTokenFile, "utf8") }),
  ]);

  say(`sandboxd simulators (development substrate, no VMs) and their vk-sandbox on the node address ${NODE_NET.nodeIp}`);
  say(isolationLine());
  const sims = await startSimCluster(2, {
    host: NODE_NET.nodeIp,
    rootToken: files.rootToken,
    pools: [`${POOL}=${WARM_PER_NODE}`],
    guestAgents: { dir: files.work },
  });
  sup.add("sandboxd simulators", () => sims.stop());
  for (const n of sims.nodes) n.peers([]);
  const kubeletPorts = freePorts(SIM_NODES.length);
  SIM_NODES.forEach((name, i) => {
    sup.spawn(`vk-sandbox-${i}`, [
      ...binary(root, "vk-sandbox"),
      `--node-name=${name}`,
      `--node-ip=${NODE_NET.nodeIp}`,
      `--listen-addr=${NODE_NET.nodeIp}:${kubeletPorts[i]}`,
      `--client-ca-file=${node.kube.clientCaFile}`,
      `--sandboxd-url=http://${sims.nodes[i]!.addr}`,
      `--sandboxd-token-file=${files.rootTokenFile}`,
      `--state-path=${join(files.work, `state-${i}`, "claims.json")}`,
      "--publish-inventory",
      "--publish-interval=2s",
    ], { KUBECONFIG: kubeconfig });
  });

  say(`helm install ${RELEASE} ./chart (images localhost/…:${o.images.tag}, certManager.enabled=false) …`);
  const helmBin = await helmBinary();
  const values = releaseValues(o.images.tag, b64(ca.certPem));
  const helm = (args: string[], v?: Record<string, unknown>) =>
    must(`helm ${args[0]}`, run([helmBin, ...args, "--kubeconfig", kubeconfig, ...(v ? ["--values", "-"] : [])], { stdin: v ? JSON.stringify(v) : undefined, timeoutMs: 900_000 }));
  await helm(["install", RELEASE, join(root, "chart"), "--namespace", RELEASE_NAMESPACE, "--wait", "--timeout", "10m"], values);
  await waitFor("APIService v1beta1.agents.x-k8s.io Available", async () => {
    const r = await node.kube.adminFetch("/apis/apiregistration.k8s.io/v1/apiservices/v1beta1.agents.x-k8s.io");
    if (!r.ok) return false;
    const s = (await r.json()) as { status?: { conditions?: Array<{ type: string; status: string }> } };
    return s.status?.conditions?.some((c) => c.type === "Available" && c.status === "True") ?? false;
  }, 180_000);
  const e2bUrl = `http://${await clusterIp(kubeconfig, "sandbox-apiserver-e2b")}`;
  const proxyUrl = `http://${await clusterIp(kubeconfig, "sandbox-envd-proxy")}`;
  await waitFor("the e2b Service", () => answers(`${e2bUrl}/health`, [200, 204]), 120_000);
  await waitFor("the envd proxy Service", () => answers(`${proxyUrl}/healthz`, [200, 204]), 120_000);
  say("example SandboxTemplate + SandboxWarmPool (examples/warm-pool.yaml)");
  await node.kube.apply(readFileSync(join(root, "examples", "warm-pool.yaml"), "utf8"));
  return { node, kubeconfig, values, e2bUrl, proxyUrl, caBundle: b64(ca.certPem), helm };
}

/** Where the stack takes its images: STACK_IMAGES_DIR/STACK_IMAGES_TAG (already built), else a build for this arch. */
async function stackImages(root: string, stateDir: string, say: (l: string) => void): Promise<{ dir: string; tag: string }> {
  if (process.env.STACK_IMAGES_DIR) return { dir: process.env.STACK_IMAGES_DIR, tag: process.env.STACK_IMAGES_TAG || "0.0.0-test" };
  const dir = join(stateDir, "images");
  const tag = "0.0.0-dev";
  const arch = process.arch === "arm64" ? "arm64" : "amd64";
  say(`building the images from the working tree for linux/${arch} (bash scripts/images.sh; a few minutes the first time) …`);
  await must(
    "bash scripts/images.sh",
    run(["bash", join(root, "scripts", "images.sh"), "--arch", arch, "--image", "sandbox-apiserver,sandbox-envd-proxy", "--tag", tag, "--out", dir], {
      cwd: root,
      env: { ...process.env, SANDBOX_SKIP_JS_INSTALL: "1", SKIP_TEST_PEERS: "1" },
    }),
  );
  return { dir, tag };
}

export async function startClusterStack(ctx: { root: string; files: StackFiles; sup: Supervisor; say(line: string): void }): Promise<StackExports> {
  const images = await stackImages(ctx.root, ctx.files.stateDir, ctx.say);
  const release = await installRelease({ ...ctx, images });
  await waitFor("warm sandboxes in every simulated node's NodeInventory", async () => {
    const r = await release.node.kube.adminFetch("/apis/sandbox.cocoonstack.io/v1beta1/nodeinventories");
    if (r.status !== 200) return false;
    const items = ((await r.json()) as { items?: { pools?: { warm: number }[] }[] }).items ?? [];
    return items.length === SIM_NODES.length && items.every((i) => (i.pools ?? []).some((p) => p.warm > 0));
  }, 120_000);
  const kubectlCmd = join(ctx.root, "scripts", "kubectl");
  return {
    lines: [
      `export KUBECONFIG=${release.kubeconfig}`,
      `export E2B_API_KEY=${ctx.files.apiKey}`,
      `export E2B_API_URL=${release.e2bUrl}`,
      `export E2B_SANDBOX_URL=${release.proxyUrl}`,
    ],
    notes: [
      `try: ${join(ctx.root, "scripts", "bun")} ${join(ctx.root, "examples", "hello.ts")} --keep`,
      `try: ${kubectlCmd} get sandboxes -A -o wide`,
      `try: ${kubectlCmd} -n ${RELEASE_NAMESPACE} get pods -o wide`,
      `(the chart's Pods run on the real node ${"sbx-node"}; E2B_API_URL and E2B_SANDBOX_URL are the Services' cluster IPs, reached through kube-proxy)`,
    ],
  };
}
