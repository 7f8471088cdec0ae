// A real kube-apiserver (v1.35, embedded etcd) for tests: each startKubeApiserver() is a fresh process on free
// loopback ports in a fresh temp dir with its own PKI, RBAC on, and service-account token signing.
// No controller-manager runs: namespaces never finish deleting, and no ServiceAccount is created for you unless
// you go through createNamespace()/apply() (which create "default" as the SA controller would).
// Talks to the server with Bun's fetch `tls` option only: it must not depend on shared/kube, which it tests.
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Subprocess } from "bun";
import { createCA, generateKeyPairPem, issueCertificate } from "#shared/tls/index.ts";
import { waitFor } from "../support/wait.ts";
import { Applier } from "./apply.ts";
import { type KubeconfigOptions, writeKubeconfig } from "./kubeconfig.ts";
import { kubeApiserverBinary } from "./peers.ts";
import { freePorts } from "./ports.ts";

export interface TestCluster {
  url: string; // https://127.0.0.1:PORT
  pid: number; // the kube-apiserver process (etcd is embedded in it): benches read its CPU from /proc/<pid>/stat
  caPem: string; // CA that signed the serving cert
  admin: { certPem: string; keyPem: string }; // client cert, O=system:masters
  user: { name: string; token: string }; // static bearer token user with NO RBAC grants
  /** The CA that verifies client certificates (--client-ca-file): what a kubelet's --client-ca-file names. */
  clientCaPem: string;
  /** That CA as a file, for a daemon's --client-ca-file (removed with the cluster). */
  clientCaFile: string;
  /** The serving CA as a file (a controller-manager's --root-ca-file); the service-account signing key's file. */
  servingCaFile: string;
  serviceAccountKeyFile: string;
  /**
   * The certificate the apiserver presents to kubelets (--kubelet-client-certificate), as kubeadm issues it: CN
   * kube-apiserver-kubelet-client, O system:masters, signed by the client CA.
   */
  kubeletClient: { certPem: string; keyPem: string };
  /**
   * The front proxy (aggregation layer): the CA the apiserver's proxy client cert is signed by, which it publishes
   * as requestheader-client-ca-file in kube-system/extension-apiserver-authentication, and the client cert's CN.
   * Every request the aggregator forwards to an APIService backend carries that cert plus X-Remote-* headers.
   */
  frontProxy: { caPem: string; clientName: string };
  kubeconfig(opts?: KubeconfigOptions): string; // writes a kubeconfig file, returns its path
  createNamespace(name: string): Promise<void>; // also creates its "default" ServiceAccount
  serviceAccountToken(namespace: string, name: string, expirationSeconds?: number): Promise<string>;
  apply(yamlOrObjects: string | object[]): Promise<void>; // create-or-replace as admin; waits for CRDs Established
  adminFetch(path: string, init?: RequestInit): Promise<Response>;
  stop(): Promise<void>; // kills the process group and removes the temp dir
}

export interface StartOptions {
  extraArgs?: string[];
  /**
   * Where the apiserver listens and what it advertises (the `kubernetes` Service's endpoint), default 127.0.0.1 for
   * both; the single-node cluster (tests/kube/node/) binds 0.0.0.0 and advertises its node address so Pods reach it
   * through the Service. The advertised address joins the serving certificate's IP SANs.
   */
  bindAddress?: string;
  advertiseAddress?: string;
}

const READY_TIMEOUT_MS = 90_000;
const START_ATTEMPTS = 3; // a free port can be taken between probing and binding
export const SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local";
const SERVICE_CIDR = "10.96.0.0/16";
const FRONT_PROXY_CLIENT = "front-proxy-client";
export const KUBELET_CLIENT_NAME = "kube-apiserver-kubelet-client";

// Every live peer, so a test process that exits without calling stop() still kills them. A process that dies
// by SIGKILL cannot run this; the wrapper's parent-death signal covers that case (apiserver/main.go).
const live = new Set<number>();
process.on("exit", () => {
  for (const pid of live) killGroup(pid);
});

function killGroup(pid: number): void {
  try {
    process.kill(-pid, "SIGKILL"); // detached: the peer leads its own process group
  } catch {
    try {
      process.kill(pid, "SIGKILL");
    } catch {}
  }
}

export async function startKubeApiserver(opts: StartOptions = {}): Promise<TestCluster> {
  const binary = await kubeApiserverBinary();
  let lastError: unknown;
  for (let attempt = 1; attempt <= START_ATTEMPTS; attempt++) {
    try {
      return await startOnce(binary, opts);
    } catch (err) {
      lastError = err;
      if (!/address already in use/i.test(String((err as Error).message))) throw err;
    }
  }
  throw lastError;
}

async function startOnce(binary: string, opts: StartOptions): Promise<TestCluster> {
  const dir = mkdtempSync(join(tmpdir(), "kube-apiserver-"));
  const file = (name: string, text: string) => {
    const p = join(dir, name);
    writeFileSync(p, text, { mode: 0o600 });
    return p;
  };

  const [servingCa, clientCa, frontProxyCa, sa] = await Promise.all([
    createCA("kube-test-serving-ca"),
    createCA("kube-test-client-ca"),
    createCA("kube-test-front-proxy-ca"),
    generateKeyPairPem(),
  ]);
  const [serving, admin, proxyClient, kubeletClient] = await Promise.all([
    issueCertificate({
      ca: servingCa,
      cn: "kube-apiserver",
      dnsNames: ["localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"],
      ips: [...new Set(["127.0.0.1", "10.96.0.1", opts.advertiseAddress ?? "127.0.0.1"])],
      usages: "server",
    }),
    issueCertificate({ ca: clientCa, cn: "test-admin", organizations: ["system:masters"], usages: "client" }),
    issueCertificate({ ca: frontProxyCa, cn: FRONT_PROXY_CLIENT, usages: "client" }),
    issueCertificate({ ca: clientCa, cn: KUBELET_CLIENT_NAME, organizations: ["system:masters"], usages: "client" }),
  ]);
  const clientCaFile = file("client-ca.crt", clientCa.certPem);
  const user = { name: "test-user", token: Buffer.from(crypto.getRandomValues(new Uint8Array(24))).toString("hex") };

  const [etcdClient, etcdPeer, securePort] = freePorts(3) as [number, number, number];
  const url = `https://127.0.0.1:${securePort}`;
  const args = [
    `--etcd-dir=${join(dir, "etcd")}`,
    `--etcd-client-port=${etcdClient}`,
    `--etcd-peer-port=${etcdPeer}`,
    "--",
    `--bind-address=${opts.bindAddress ?? "127.0.0.1"}`,
    `--advertise-address=${opts.advertiseAddress ?? "127.0.0.1"}`,
    `--secure-port=${securePort}`,
    `--cert-dir=${join(dir, "certs")}`,
    `--tls-cert-file=${file("serving.crt", serving.certPem)}`,
    `--tls-private-key-file=${file("serving.key", serving.keyPem)}`,
    `--client-ca-file=${clientCaFile}`,
    `--token-auth-file=${file("tokens.csv", `${user.token},${user.name},uid-${user.name}\n`)}`,
    "--authorization-mode=RBAC",
    `--service-account-issuer=${SERVICE_ACCOUNT_ISSUER}`,
    `--service-account-key-file=${file("sa.pub", sa.publicKeyPem)}`,
    `--service-account-signing-key-file=${file("sa.key", sa.privateKeyPem)}`,
    `--service-cluster-ip-range=${SERVICE_CIDR}`,
    "--profiling=false",
    // The aggregation layer, as kubeadm sets it up: these fill kube-system/extension-apiserver-authentication and
    // make the aggregator present the proxy client cert, with the caller's identity in X-Remote-* headers, to
    // every APIService backend. Aggregator routing stays off: the cluster resolver dials an ExternalName
    // Service's externalName, which is how a backend on loopback is reached (the endpoint resolver refuses it).
    `--requestheader-client-ca-file=${file("front-proxy-ca.crt", frontProxyCa.certPem)}`,
    `--requestheader-allowed-names=${FRONT_PROXY_CLIENT}`,
    "--requestheader-username-headers=X-Remote-User",
    "--requestheader-group-headers=X-Remote-Group",
    "--requestheader-extra-headers-prefix=X-Remote-Extra-",
    `--proxy-client-cert-file=${file("front-proxy-client.crt", proxyClient.certPem)}`,
    `--proxy-client-key-file=${file("front-proxy-client.key", proxyClient.keyPem)}`,
    // What it presents to a kubelet API (logs, exec, port-forward, node proxy); vk-sandbox verifies it.
    `--kubelet-client-certificate=${file("kubelet-client.crt", kubeletClient.certPem)}`,
    `--kubelet-client-key=${file("kubelet-client.key", kubeletClient.keyPem)}`,
    ...(opts.extraArgs ?? []),
  ];
  const logPath = join(dir, "apiserver.log");
  const logFd = openSync(logPath, "w");
  let proc: Subprocess;
  try {
    proc = Bun.spawn([binary, ...args], {
      cwd: dir,
      detached: true,
      stdio: ["ignore", logFd, logFd],
      env: { ...process.env, SANDBOX_TEST_PARENT_PID: String(process.pid) },
    });
  } finally {
    closeSync(logFd);
  }
  live.add(proc.pid);

  const tls = { ca: servingCa.certPem, cert: admin.certPem, key: admin.keyPem };
  const adminFetch = (path: string, init: RequestInit = {}) => fetch(`${url}${path}`, { ...init, tls });

  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    killGroup(proc.pid);
    await proc.exited;
    live.delete(proc.pid);
    rmSync(dir, { recursive: true, force: true });
  };

  const createNamespace = async (name: string) => {
    await createIfAbsent(adminFetch, "/api/v1/namespaces", { apiVersion: "v1", kind: "Namespace", metadata: { name } });
    await createIfAbsent(adminFetch, `/api/v1/namespaces/${name}/serviceaccounts`, {
      apiVersion: "v1",
      kind: "ServiceAccount",
      metadata: { name: "default", namespace: name },
    });
  };

  try {
    await waitReady(proc, adminFetch, logPath);
    // The bootstrap controller creates the system namespaces after /readyz can already pass; wait for the last.
    await waitFor(
      "namespace kube-node-lease",
      async () => {
        const r = await adminFetch("/api/v1/namespaces/kube-node-lease");
        await r.body?.cancel(); // only the status matters; an unread body holds its connection
        return r.ok;
      },
      30_000,
      50,
    );
    await createNamespace("default");
  } catch (err) {
    const log = safeTail(logPath);
    await stop();
    throw new Error(`kube-apiserver did not start: ${(err as Error).message}\n--- log tail ---\n${log}`);
  }

  const applier = new Applier(adminFetch, createNamespace);
  let kubeconfigs = 0;
  const cluster: TestCluster = {
    url,
    pid: proc.pid,
    caPem: servingCa.certPem,
    admin,
    user,
    clientCaPem: clientCa.certPem,
    clientCaFile,
    servingCaFile: file("serving-ca.crt", servingCa.certPem),
    serviceAccountKeyFile: join(dir, "sa.key"),
    kubeletClient,
    frontProxy: { caPem: frontProxyCa.certPem, clientName: FRONT_PROXY_CLIENT },
    kubeconfig: (o = {}) =>
      writeKubeconfig({ url, caPem: servingCa.certPem, admin, user }, o, o.path ?? join(dir, `kubeconfig-${++kubeconfigs}.yaml`)),
    createNamespace,
    serviceAccountToken: async (namespace, name, expirationSeconds = 3600) => {
      const r = await adminFetch(`/api/v1/namespaces/${namespace}/serviceaccounts/${name}/token`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ apiVersion: "authentication.k8s.io/v1", kind: "TokenRequest", spec: { expirationSeconds } }),
      });
      if (!r.ok) throw new Error(`TokenRequest ${namespace}/${name}: ${r.status} ${await r.text()}`);
      return ((await r.json()) as { status: { token: string } }).status.token;
    },
    apply: (input) => applier.apply(input),
    adminFetch,
    stop,
  };
  return cluster;
}

async function waitReady(proc: Subprocess, adminFetch: TestCluster["adminFetch"], logPath: string): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  let last = "no answer";
  while (Date.now() < deadline) {
    if (proc.exitCode !== null || proc.signalCode !== null) {
      const tail = safeTail(logPath);
      if (/address already in use/i.test(tail)) throw new Error("address already in use");
      throw new Error(`exited (${proc.exitCode ?? proc.signalCode})`);
    }
    try {
      const r = await adminFetch("/readyz");
      if (r.ok) {
        await r.body?.cancel();
        return;
      }
      last = `${r.status} ${(await r.text()).split("\n").filter((l) => l.includes("failed")).join("; ")}`;
    } catch (err) {
      last = (err as Error).message;
    }
    await Bun.sleep(100);
  }
  throw new Error(`/readyz not ok after ${READY_TIMEOUT_MS}ms (last: ${last})`);
}

async function createIfAbsent(adminFetch: TestCluster["adminFetch"], path: string, obj: object): Promise<void> {
  const r = await adminFetch(path, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(obj),
  });
  if (r.ok || r.status === 409) {
    await r.body?.cancel();
    return;
  }
  throw new Error(`POST ${path}: ${r.status} ${await r.text()}`);
}

function safeTail(path: string, lines = 30): string {
  try {
    return readFileSync(path, "utf8").split("\n").slice(-lines).join("\n");
  } catch {
    return "(no log)";
  }
}

