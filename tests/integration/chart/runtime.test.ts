// The chart's Deployments, run for real: after `helm install` on the test kube-apiserver, the real sandbox-apiserver
// and sandbox-envd-proxy processes start with exactly the args and env rendered into their Deployments (mount paths
// mapped to files standing in for the Secret volumes, and KUBECONFIG holding the pod's ServiceAccount token, since
// there is no in-cluster config here). They reach ready, serve (the e2b surface to the stock SDK), elect a driver
// leader and write pool status; and the kube-apiserver's audit log shows that not one of their requests was refused:
// the RBAC the chart binds is enough for the calls the code really makes.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Subprocess } from "bun";
import { Sandbox } from "e2b";
import { startSandboxdSim, type SandboxdSim } from "#services/sandboxd-sim/sim.ts";
import { startTestGuest, type TestGuest } from "#tests/integration/e2b/guest.ts";
import { createCA, issueCertificate } from "#shared/tls/index.ts";
import { startKubeApiserver, type TestCluster } from "#tests/kube/harness.ts";
import { freePorts } from "#tests/kube/ports.ts";
import { vouchingNode } from "#tests/kube/nodes.ts";
import { E2B, NAMESPACE, POOL_FIXTURES, at, chartDir, container, containerEnv, deployment, helm, merge, render, root, type Container, type KubeObject } from "./helm.ts";
import { GiveUp, waitFor } from "#tests/support/wait.ts";

const SA_USERS = [`system:serviceaccount:${NAMESPACE}:sandbox-apiserver`, `system:serviceaccount:${NAMESPACE}:sandbox-envd-proxy`];

let cluster: TestCluster;
let dir: string;
let auditPath: string;
let objects: KubeObject[];
let servingCaPem: string;
const [securePort, e2bPort, proxyPort, proxyMetricsPort] = freePorts(4) as [number, number, number, number];
const children: Subprocess[] = [];
let sim: SandboxdSim;
let guest: TestGuest;
const TEMPLATE = "python:3.12"; // POOL_FIXTURES' image: the driver keeps it warm on the simulated node
let apiProcess: { proc: Subprocess; stderr: () => string };
let proxyProcess: { proc: Subprocess; stderr: () => string };

/** What the kubelet would mount: each Secret volume's files, under a directory standing for its mount path. */
function mountFiles(servingCert: { certPem: string; keyPem: string }): Record<string, Record<string, string>> {
  return {
    "sandbox-apiserver-serving-certs": { "tls.crt": servingCert.certPem, "tls.key": servingCert.keyPem },
    "sandboxd-token": { token: "root-token\n" }, // the simulated node's api_token
    "e2b-api-keys": { keys: "test-key team\n" },
    "sandbox-e2b-envd-secret": { secret: "envd-key" },
  };
}

/** The container's args and env with every mount path replaced by its stand-in directory. */
function localize(objects: KubeObject[], name: string, secrets: Record<string, Record<string, string>>): { args: string[]; env: Record<string, string> } {
  const c: Container = container(objects, name);
  const volumes = deployment(objects, name).template.spec.volumes ?? [];
  let args = c.args ?? [];
  for (const m of c.volumeMounts ?? []) {
    const v = volumes.find((x) => x.name === m.name)!;
    if (!v.secret && !v.configMap) continue; // the /tmp emptyDir: no flag names a file in it
    const local = join(dir, name, m.name);
    mkdirSync(local, { recursive: true });
    // A Secret's files are stand-ins (the Secrets live outside the chart); a ConfigMap's are what the chart renders.
    const files = v.secret
      ? secrets[v.secret.secretName]
      : (objects.find((o) => o.kind === "ConfigMap" && o.metadata.name === v.configMap!.name)?.data as Record<string, string> | undefined);
    if (!files) throw new Error(`no content for volume ${m.name}`);
    for (const [f, content] of Object.entries(files)) writeFileSync(join(local, f), content, { mode: 0o600 });
    args = args.map((a) => a.replace(`=${m.mountPath}/`, `=${local}/`));
  }
  return { args, env: containerEnv(c) };
}

async function serviceAccountKubeconfig(sa: string): Promise<string> {
  const token = await cluster.serviceAccountToken(NAMESPACE, sa, 3600);
  return cluster.kubeconfig({ auth: "token", token, path: join(dir, `${sa}.kubeconfig`) });
}

/** The test plays vk-sandbox: the node's inventory as its sandboxd reports it, stamped now. */
async function publishNode(): Promise<void> {
  await vouchingNode(cluster, "node-a", sim.addr);
  await cluster.apply([
    {
      apiVersion: "sandbox.cocoonstack.io/v1beta1",
      kind: "NodeInventory",
      metadata: { name: "node-a" },
      node: "node-a",
      address: sim.addr,
      publishedAt: new Date().toISOString().replace(/\.\d{3}Z$/, "Z"),
      pools: sim.info().pools.map((p) => ({ template: p.key.template, net: p.key.net, size: p.key.size, warm: p.warm, target: p.target })),
      entries: sim.claims().map((c) => ({ name: c.claimRef || c.id, id: c.id, phase: "Running", template: c.key.template, ...(c.claimRef ? { claimRef: c.claimRef } : {}) })),
    },
  ]);
}

function spawn(bin: string, args: string[], env: Record<string, string>): { proc: Subprocess; stderr: () => string } {
  let err = "";
  const proc = Bun.spawn([process.execPath, join(root, "services", bin, "main.ts"), ...args], {
    cwd: dir,
    env: { PATH: process.env.PATH ?? "", HOME: dir, ...env },
    stdio: ["ignore", "ignore", "pipe"],
  });
  children.push(proc);
  void (async () => {
    const dec = new TextDecoder();
    for await (const chunk of proc.stderr as ReadableStream<Uint8Array>) err += dec.decode(chunk);
  })();
  return { proc, stderr: () => err };
}

/** waitFor that gives up at once, with the process's stderr, when the process it waits on exits. */
async function until<T>(what: string, check: () => Promise<T | undefined>, p: { proc: Subprocess; stderr: () => string }, ms = 30_000): Promise<T> {
  try {
    return await waitFor(what, async () => {
      if (p.proc.exitCode !== null) throw new GiveUp(`exited ${p.proc.exitCode} while waiting for ${what}:\n${p.stderr()}`);
      return check();
    }, ms, 200);
  } catch (e) {
    if (e instanceof GiveUp) throw e;
    throw new Error(`${(e as Error).message}:\n${p.stderr()}`);
  }
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "chart-runtime-"));
  auditPath = join(dir, "audit.log");
  const policy = join(dir, "audit-policy.yaml");
  writeFileSync(
    policy,
    ["apiVersion: audit.k8s.io/v1", "kind: Policy", "omitStages: [RequestReceived]", "rules:", "- level: Metadata", `  users: ${JSON.stringify(SA_USERS)}`, "- level: None", ""].join("\n"),
  );
  cluster = await startKubeApiserver({ extraArgs: [`--audit-policy-file=${policy}`, `--audit-log-path=${auditPath}`, "--audit-log-mode=blocking"] });
  await cluster.createNamespace(NAMESPACE);
  await cluster.createNamespace("team");
  for (const f of readdirSync(join(root, "manifests", "crds")).filter((f) => f.includes("agents.x-k8s.io"))) {
    await cluster.apply(readFileSync(join(root, "manifests", "crds", f), "utf8"));
  }
  // A simulated sandboxd node (development substrate) with an envd stand-in behind its ports relay.
  sim = await startSandboxdSim({ rootToken: "root-token", pools: [`${TEMPLATE}/none/small=2`] });
  guest = await startTestGuest();
  sim.attachGuest("*", 49983, guest.port);
  const ca = await createCA("chart-runtime-ca");
  servingCaPem = ca.certPem;
  const serving = await issueCertificate({ ca, cn: `sandbox-apiserver.${NAMESPACE}.svc`, dnsNames: [`sandbox-apiserver.${NAMESPACE}.svc`, "localhost"], ips: ["127.0.0.1"], usages: "server" });
  const values = merge(
    E2B,
    at("apiserver", {
      securePort,
      sandboxdToken: { secretName: "sandboxd-token" },
      e2b: { port: e2bPort, envdSecret: { value: "envd-key", secretName: "" }, templateAliases: `base ${TEMPLATE}\n` },
    }),
    at("envdProxy.port", proxyPort),
    at("envdProxy.metricsPort", proxyMetricsPort),
    at("certManager", { enabled: false, caBundle: Buffer.from(ca.certPem).toString("base64") }),
  );
  // The CRD comes from the chart's crds/ (helm installs it), everything else from its templates.
  const install = await helm(["install", "sandbox-operator", chartDir, "--namespace", NAMESPACE, "--kubeconfig", cluster.kubeconfig()], values);
  if (install.code !== 0) throw new Error(`helm install failed:\n${install.stderr}`);
  objects = await render(values);
  await cluster.apply(POOL_FIXTURES);
  await publishNode();
  const secrets = mountFiles(serving);
  const api = localize(objects, "sandbox-apiserver", secrets);
  apiProcess = spawn("sandbox-apiserver", api.args, { ...api.env, KUBECONFIG: await serviceAccountKubeconfig("sandbox-apiserver") });
  const proxy = localize(objects, "sandbox-envd-proxy", secrets);
  proxyProcess = spawn("sandbox-envd-proxy", proxy.args, { ...proxy.env, KUBECONFIG: await serviceAccountKubeconfig("sandbox-envd-proxy") });
}, 180_000);

afterAll(async () => {
  for (const c of children) c.kill("SIGKILL");
  await sim?.stop();
  await guest?.stop();
  await cluster?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("the chart's Deployments as real processes under the chart's ServiceAccounts", () => {

  test("sandbox-apiserver becomes ready on the rendered secure port and answers a delegated-auth request", async () => {
    await until("sandbox-apiserver /readyz", async () => {
      const r = await fetch(`https://127.0.0.1:${securePort}/readyz`, { tls: { ca: servingCaPem } });
      await r.body?.cancel();
      return r.ok ? true : undefined;
    }, apiProcess, 60_000);
    // The test user's token goes through TokenReview, then SubjectAccessReview (denied: it has no grants).
    const r = await fetch(`https://127.0.0.1:${securePort}/apis/agents.x-k8s.io/v1beta1/sandboxes`, {
      headers: { authorization: `Bearer ${cluster.user.token}` },
      tls: { ca: servingCaPem },
    });
    const body = await r.text();
    expect(r.status).toBe(403);
    expect(body).toContain(cluster.user.name);
  }, 90_000);

  test("the warm-pool driver takes its Lease in the release namespace and writes the pool's status", async () => {
    const lease = await until("Lease cocoon-warmpool-driver", async () => {
      const r = await cluster.adminFetch(`/apis/coordination.k8s.io/v1/namespaces/${NAMESPACE}/leases/cocoon-warmpool-driver`);
      return r.ok ? ((await r.json()) as { spec: { holderIdentity?: string } }) : undefined;
    }, apiProcess, 60_000);
    expect(lease.spec.holderIdentity).toBeTruthy();
    const status = await until("SandboxWarmPool status", async () => {
      const r = await cluster.adminFetch("/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/team/sandboxwarmpools/py");
      const s = ((await r.json()) as { status?: { selector?: string } }).status;
      return s?.selector ? s : undefined;
    }, apiProcess, 60_000);
    expect(status.selector).toBe("agents.x-k8s.io/warm-pool=py");
  }, 90_000);

  test("the e2b surface serves the stock e2b SDK on the rendered port, with the mounted API key", async () => {
    const opts = { apiKey: "test-key", apiUrl: `http://127.0.0.1:${e2bPort}`, domain: "sandbox.example.com", requestTimeoutMs: 10_000 };
    const listed = await until("e2b surface", async () => Sandbox.list(opts).nextItems(), apiProcess);
    expect(listed).toEqual([]);
    // A key that is not in the mounted key file is refused.
    await expect(Sandbox.list({ ...opts, apiKey: "not-a-key" }).nextItems()).rejects.toThrow();
  }, 60_000);

  test("an SDK sandbox created through the e2b surface is reached through the proxy: both mount the same envd secret", async () => {
    const sbx = await Sandbox.create("base", {
      apiKey: "test-key",
      apiUrl: `http://127.0.0.1:${e2bPort}`,
      domain: "sandbox.example.com",
      sandboxUrl: `http://127.0.0.1:${proxyPort}`, // header routing (E2B_SANDBOX_URL); DNS *.domain in a cluster
      requestTimeoutMs: 10_000,
    });
    try {
      const claim = sim.claims().find((c) => c.claimRef?.startsWith("team/"));
      expect(claim?.key.template).toBe(TEMPLATE); // the alias from the rendered ConfigMap, the key's namespace
      await publishNode();
      // The access token the apiserver derived from its secret file verifies at the proxy against its own mount.
      await until("a file written through the proxy", async () => (await sbx.files.write("/tmp/chart.txt", "through the proxy")) && true, proxyProcess);
      expect(await sbx.files.read("/tmp/chart.txt")).toBe("through the proxy");
      expect(guest.requests.some((r) => r.path.startsWith("/files"))).toBe(true);

      // The control: a proxy with another envd secret refuses the same sandbox's token.
      const [otherPort, otherMetricsPort] = freePorts(2) as [number, number];
      const otherSecret = join(dir, "other-envd-secret");
      writeFileSync(otherSecret, "another-key", { mode: 0o600 });
      const local = localize(objects, "sandbox-envd-proxy", mountFiles({ certPem: "", keyPem: "" }));
      const args = local.args.map((a) =>
        a.startsWith("--e2b-envd-secret-file=")
          ? `--e2b-envd-secret-file=${otherSecret}`
          : a.startsWith("--bind-address=")
            ? `--bind-address=:${otherPort}`
            : a.startsWith("--metrics-bind-address=")
              ? `--metrics-bind-address=127.0.0.1:${otherMetricsPort}`
              : a,
      );
      const other = spawn("sandbox-envd-proxy", args, { ...local.env, KUBECONFIG: join(dir, "sandbox-envd-proxy.kubeconfig") });
      await until("the second proxy", async () => (await fetch(`http://127.0.0.1:${otherPort}/healthz`)).status === 204 || undefined, other);
      const viaOther = await Sandbox.connect(sbx.sandboxId, {
        apiKey: "test-key",
        apiUrl: `http://127.0.0.1:${e2bPort}`,
        domain: "sandbox.example.com",
        sandboxUrl: `http://127.0.0.1:${otherPort}`,
        requestTimeoutMs: 10_000,
      });
      const refused = await viaOther.files.read("/tmp/chart.txt").then(() => undefined, (e: Error) => e);
      expect(`${refused?.name}: ${refused?.message}`).toBe("AuthenticationError: invalid sandbox access token");
      other.proc.kill("SIGKILL");
    } finally {
      await sbx.kill().catch(() => undefined);
    }
  }, 90_000);

  test("sandbox-envd-proxy answers /healthz on the rendered port", async () => {
    const status = await until("envd proxy /healthz", async () => {
      const r = await fetch(`http://127.0.0.1:${proxyPort}/healthz`);
      await r.body?.cancel();
      return r.status;
    }, proxyProcess, 60_000);
    expect(status).toBe(204);
  }, 90_000);

  test("sandbox-envd-proxy serves its series on the rendered metrics port, the one the ServiceMonitor scrapes", async () => {
    const text = await until("envd proxy /metrics", async () => {
      const r = await fetch(`http://127.0.0.1:${proxyMetricsPort}/metrics`);
      return r.status === 200 ? r.text() : undefined;
    }, proxyProcess, 60_000);
    expect(text).toContain("sandbox_envd_proxy_requests_total");
    const onPublic = await fetch(`http://127.0.0.1:${proxyPort}/metrics`);
    expect(onPublic.status).toBe(400);
    await onPublic.body?.cancel();
  }, 90_000);

  test("the audit log holds their requests and not one was refused", async () => {
    const events = readFileSync(auditPath, "utf8")
      .split("\n")
      .filter((l) => l.trim() !== "")
      .map((l) => JSON.parse(l) as { user: { username: string }; verb: string; requestURI: string; responseStatus?: { code: number } });
    for (const user of SA_USERS) expect(events.some((e) => e.user.username === user)).toBe(true);
    const refused = events.filter((e) => e.responseStatus?.code === 403).map((e) => `${e.user.username} ${e.verb} ${e.requestURI}`);
    expect(refused).toEqual([]);
    // What they did, for the record: the calls the RBAC had to allow.
    const seen = new Set(events.map((e) => `${e.user.username.split(":").pop()} ${e.verb} ${e.requestURI.split("?")[0]!.replace(/\/[^/]*\.[0-9]+$/, "")}`));
    expect([...seen].some((s) => s.startsWith("sandbox-apiserver watch /apis/sandbox.cocoonstack.io"))).toBe(true);
    expect([...seen].some((s) => s.startsWith("sandbox-envd-proxy watch /apis/sandbox.cocoonstack.io"))).toBe(true);
    expect([...seen].some((s) => s.includes("create /apis/authentication.k8s.io/v1/tokenreviews"))).toBe(true);
    expect([...seen].some((s) => s.includes("create /apis/authorization.k8s.io/v1/subjectaccessreviews"))).toBe(true);
    expect([...seen].some((s) => s.includes("/namespaces/kube-system/configmaps/extension-apiserver-authentication"))).toBe(true);
    expect([...seen].some((s) => s.includes("sandboxwarmpools/py/status"))).toBe(true);
  });
});
