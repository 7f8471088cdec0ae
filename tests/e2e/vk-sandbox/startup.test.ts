// Startup, configuration and shutdown of the vk-sandbox process (§11 scenarios 1–8, 11–13, 48) on a real
// kube-apiserver, plus the proof that manifests/rbac.yaml is sufficient: the daemon runs as the ServiceAccount and
// the apiserver's audit log shows no request of it refused.
import { describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { auditEvents, sandboxPod } from "./cluster.ts";
import { waitFor } from "../../support/wait.ts";
import { freePorts } from "../../kube/ports.ts";
import { Daemon } from "./daemon.ts";
import { simRequests, useE2eStack } from "./stack.ts";

const env = useE2eStack();

const freshState = () => join(mkdtempSync(join(tmpdir(), "vk-e2e-start-")), "state", "claims.json");
const nodeExists = async (name: string) => (await env.e2e.kube.node(name)).status === 200;
const nodeReady = (name: string) =>
  waitFor(`node ${name} Ready`, async () => {
    const n = await env.e2e.kube.node(name);
    return n.status === 200 && n.body.status?.conditions?.some((c: { type: string; status: string }) => c.type === "Ready" && c.status === "True") && n.body;
  });

describe("vk-sandbox startup and shutdown", () => {
  test("defaults: the node carries the labels, taint, port and capacity, addresses in order, and turns Ready", async () => {
    const d = env.stack.daemon({ node: "vk-defaults", statePath: freshState(), extra: ["--node-ip=10.1.2.3"] });
    const node = await nodeReady("vk-defaults");
    expect(node.metadata.labels).toMatchObject({
      type: "virtual-kubelet",
      "kubernetes.io/role": "agent",
      "kubernetes.io/hostname": "vk-defaults",
      "sandbox.cocoonstack.io/runtime": "sandboxd",
    });
    // The apiserver's own admission may add node.kubernetes.io/not-ready at create; ours must be there.
    expect(node.spec.taints).toEqual(expect.arrayContaining([{ key: "virtual-kubelet.io/provider", value: "sandboxd", effect: "NoSchedule" }]));
    expect(node.status.daemonEndpoints.kubeletEndpoint.Port).toBe(d.port);
    expect(node.status.capacity).toEqual({ cpu: "4k", memory: "8Ti", pods: "2k" });
    expect(node.status.addresses).toEqual([
      { type: "InternalIP", address: "10.1.2.3" },
      { type: "Hostname", address: "vk-defaults" },
    ]);
    await d.kill("SIGKILL");
  }, 60_000);

  test("an explicit --node-name wins over VK_NODE_NAME", async () => {
    const d = env.stack.daemon({ node: "b-node", statePath: freshState(), env: { VK_NODE_NAME: "a-node" } });
    await nodeReady("b-node");
    expect(await nodeExists("a-node")).toBe(false);
    await d.kill("SIGKILL");
  }, 60_000);

  test("a missing state file and directory are created 0700 / 0600 holding an empty table", async () => {
    const statePath = freshState();
    const d = env.stack.daemon({ node: "vk-fresh", statePath });
    await d.waitForLog(/vk-sandbox ready/);
    expect(statSync(join(statePath, "..")).mode & 0o777).toBe(0o700);
    expect(statSync(statePath).mode & 0o777).toBe(0o600);
    expect(JSON.parse(readFileSync(statePath, "utf8"))).toEqual({ claims: {} });
    await d.kill("SIGKILL");
  }, 60_000);

  test("an empty VK_STATE_PATH means the default path; an explicit empty --state-path is refused", async () => {
    const refused = Daemon.start({ args: ["--state-path="], env: { KUBECONFIG: env.e2e.kubeconfig } });
    expect(await refused.exitCode()).toBe(2); // a usage error
    expect(refused.log()).toMatch(/state-path.*must not be empty/);

    // The default path is real system state: the daemon gets a private tmpfs over /var/lib, and the test reads
    // the file it wrote through /proc/<pid>/root. The machine's /var/lib/vk-sandbox is never touched.
    const defaultPath = "/var/lib/vk-sandbox/claims.json";
    const d = Daemon.start({
      args: ["--node-name=vk-default-path", `--sandboxd-url=${env.stack.gate.url}`, `--sandboxd-token-file=${env.stack.tokenFile}`, `--listen-addr=127.0.0.1:${freePorts(1)[0]}`],
      env: { KUBECONFIG: env.e2e.nodeKubeconfig("vk-default-path"), VK_STATE_PATH: "" },
      privateVarLib: true,
    });
    try {
      await d.waitForLog(/vk-sandbox ready/);
      expect(d.log()).toContain(defaultPath);
      expect(JSON.parse(readFileSync(`/proc/${d.proc.pid}/root${defaultPath}`, "utf8"))).toEqual({ claims: {} });
    } finally {
      await d.kill("SIGKILL");
    }
  }, 60_000);

  test("a malformed state file stops startup with no Node write and leaves the file unchanged", async () => {
    const statePath = freshState();
    mkdirSync(join(statePath, ".."), { recursive: true });
    writeFileSync(statePath, "{not json", { mode: 0o600 });
    const d = env.stack.daemon({ node: "vk-malformed", statePath });
    expect(await d.exitCode()).toBe(1);
    expect(readFileSync(statePath, "utf8")).toBe("{not json");
    expect(await nodeExists("vk-malformed")).toBe(false);
  }, 60_000);

  test("a state path that cannot be written stops startup and registers no Node", async () => {
    // Tests run as root, which ignores directory modes; /proc refuses every create whoever asks.
    const d = env.stack.daemon({ node: "vk-readonly", statePath: "/proc/vk-sandbox-e2e/claims.json" });
    expect(await d.exitCode()).toBe(1);
    expect(await nodeExists("vk-readonly")).toBe(false);
  }, 60_000);

  test("VK_LOG_LEVEL=verbose stops startup; debug, info, warn and error (any case) all start", async () => {
    const bad = env.stack.daemon({ node: "vk-verbose", statePath: freshState(), env: { VK_LOG_LEVEL: "verbose" } });
    expect(await bad.exitCode()).toBe(1);
    for (const level of ["debug", "INFO", "warn", "error"]) {
      const name = `vk-level-${level.toLowerCase()}`;
      const d = env.stack.daemon({ node: name, statePath: freshState(), env: { VK_LOG_LEVEL: level } });
      await nodeReady(name);
      await d.kill("SIGKILL");
    }
  }, 90_000);

  test("a bare port as --listen-addr, a memory of 'banana' or an unreadable token file stop startup", async () => {
    // Usage errors exit 2, other fatal startup errors 1; each names the flag. (A daemon still running reads as -1.)
    const cases: Array<[string[], number, RegExp]> = [
      [["--listen-addr=10260"], 2, /listen-addr/],
      [["--node-memory=banana"], 2, /node-memory/],
      [["--sandboxd-token-file=/nonexistent/token"], 1, /sandboxd-token-file \/nonexistent\/token/],
    ];
    for (const [extra, code, message] of cases) {
      const d = Daemon.start({ args: [`--state-path=${freshState()}`, "--node-name=vk-bad-flags", ...extra], env: { KUBECONFIG: env.e2e.kubeconfig } });
      expect(await d.exitCode()).toBe(code);
      expect(d.log()).toMatch(message);
    }
    expect(await nodeExists("vk-bad-flags")).toBe(false);
  }, 60_000);

  test("no in-cluster environment and no KUBECONFIG stops startup", async () => {
    const home = mkdtempSync(join(tmpdir(), "vk-e2e-home-"));
    const d = Daemon.start({ args: [`--state-path=${freshState()}`], env: { HOME: home } });
    expect(await d.exitCode()).toBe(1);
    expect(d.log()).toMatch(/KUBECONFIG/);
  }, 30_000);

  test("scenario 12 / issue 7 case 8: no KUBECONFIG while ~/.kube/config holds a working admin kubeconfig: exit 1 naming KUBECONFIG, no Node", async () => {
    const home = mkdtempSync(join(tmpdir(), "vk-e2e-home-"));
    mkdirSync(join(home, ".kube"));
    // kubectl would use this file; a node daemon must not start as whatever admin root's home holds.
    writeFileSync(join(home, ".kube", "config"), readFileSync(env.e2e.cluster.kubeconfig({ auth: "admin-cert" })));
    const d = Daemon.start({ args: ["--node-name=vk-homeconfig", `--state-path=${freshState()}`], env: { HOME: home } });
    expect(await d.exitCode()).toBe(1);
    expect(d.log()).toMatch(/KUBECONFIG is not set/);
    expect(await nodeExists("vk-homeconfig")).toBe(false);
  }, 30_000);

  test("--version prints the build line and exits 0 without touching the network", async () => {
    const before = auditEvents(env.e2e.auditPath).length;
    const sandboxd = simRequests(env.stack.sim, "list") + simRequests(env.stack.sim, "info");
    const d = Daemon.start({ args: ["--version"], env: { KUBECONFIG: env.e2e.kubeconfig, SANDBOXD_URL: env.stack.gate.url } });
    expect(await d.exitCode()).toBe(0);
    expect(d.log()).toMatch(/^vk-sandbox \S+ \(rev=\S+ built=\S+\)\n$/);
    expect(auditEvents(env.e2e.auditPath).length).toBe(before);
    expect(simRequests(env.stack.sim, "list") + simRequests(env.stack.sim, "info")).toBe(sandboxd);
  }, 30_000);

  test("SIGTERM exits 0, keeps the Node, lets the Lease go stale and releases nothing", async () => {
    const statePath = freshState();
    const d = env.stack.daemon({ node: "vk-term", statePath });
    await nodeReady("vk-term");
    await env.e2e.kube.createPod(sandboxPod("term", "vk-term"));
    await waitFor("Running", async () => (await env.e2e.kube.pod("ns", "term"))?.status?.phase === "Running");
    const releases = simRequests(env.stack.sim, "release");
    expect(await d.kill("SIGTERM")).toBe(0);
    expect(await nodeExists("vk-term")).toBe(true);
    const lease = async () => (await env.e2e.kube.ok<{ spec: { renewTime: string } }>("GET", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/vk-term")).spec.renewTime;
    const renewed = await lease();
    await Bun.sleep(11_000); // one renew interval (10 s) and a margin: a live daemon would have renewed by now
    expect(await lease()).toBe(renewed);
    expect(simRequests(env.stack.sim, "release")).toBe(releases);
  }, 60_000);

  test("the node ServiceAccounts of manifests/rbac.yaml, under manifests/node-admission.yaml, are enough: no request of any daemon was refused", async () => {
    // Every daemon in this file ran as its own node's ServiceAccount (system:serviceaccount:sandbox-nodes:<node>),
    // never as admin, under manifests/rbac.yaml and the node admission policy, through registration, leases, pod
    // sync, status, events and deletes. Exercise the owner read and the inventory too.
    const statePath = freshState();
    const d = env.stack.daemon({ node: "vk-rbac", statePath, extra: ["--publish-inventory", "--publish-interval=1s"] });
    await nodeReady("vk-rbac");
    const owner = await env.e2e.kube.createSandbox("ns", "rbac");
    await env.e2e.kube.createPod(sandboxPod("rbac", "vk-rbac", { owner: { name: "rbac", uid: owner.metadata.uid } }));
    await waitFor("Running", async () => (await env.e2e.kube.pod("ns", "rbac"))?.status?.phase === "Running");
    await env.e2e.kube.deletePod("ns", "rbac");
    await waitFor("deleted", async () => !(await env.e2e.kube.pod("ns", "rbac")), 30_000);
    await waitFor("inventory published", async () => (await env.e2e.kube.req("GET", "/apis/sandbox.cocoonstack.io/v1beta1/nodeinventories/vk-rbac")).status === 200);
    await d.kill("SIGTERM");
    const events = auditEvents(env.e2e.auditPath);
    const verbs = new Set(events.map((e) => `${e.verb} ${e.requestURI.split("?")[0]!.replace(/\/namespaces\/[^/]+/, "/namespaces/*").replace(/\/(pods|nodes|leases|events|sandboxes|nodeinventories)\/[^/]+/, "/$1/*")}`));
    const refused = events.filter((e) => [401, 403, 422].includes(e.responseStatus?.code ?? 0));
    expect(refused.map((e) => `${e.verb} ${e.requestURI}`)).toEqual([]);
    // The owner read (delete authorization) happened, as the ServiceAccount.
    expect([...verbs].some((v) => v.startsWith("get /apis/agents.x-k8s.io/"))).toBe(true);
  }, 90_000);
});
