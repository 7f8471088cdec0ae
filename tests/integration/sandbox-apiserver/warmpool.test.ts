// The warm-pool driver on the real kube-apiserver with the agent-sandbox CRDs and simulated nodes (scenarios 37-43):
// key resolution, even spread, the full pool-set PUT, status write-back, fail-closed without a token, leader
// election with takeover after kill -9, and a leader that loses its Lease keeps serving reads.
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { startSandboxdSim, type SandboxdSim } from "#services/sandboxd-sim/sim.ts";
import { type ApiserverProcess, NAMESPACE, type Stack, rfc3339, startStack } from "./fixture.ts";
import { waitFor } from "#tests/support/wait.ts";
import { kubectl } from "../../kube/kubectl.ts";

const ROOT = "root";
// How long a started server may take to converge (elect itself, sync its informers, run a pass, get status written):
// about 1 s on an idle machine, many times that on a loaded 2-core CI box. Only a ceiling: every wait below ends as
// soon as its condition holds.
const CONVERGE_MS = 30_000;
const IMG = "img:warm";
let stack: Stack;
const sims: SandboxdSim[] = [];
const servers: ApiserverProcess[] = [];
let publishing = true;
let publisherLoop: Promise<void>;
let addressless = false;

beforeAll(async () => {
  stack = await startStack();
  for (let i = 0; i < 3; i++) sims.push(await startSandboxdSim({ rootToken: ROOT }));
  await stack.cluster.createNamespace("pools");
  // The harness plays vk-sandbox: every node republishes its live pool counts every second.
  publisherLoop = (async () => {
    while (publishing) {
      const at = rfc3339(Date.now());
      await Promise.all(
        sims.map((s, i) =>
          stack.publish({
            node: `n${i + 1}`,
            address: s.addr,
            publishedAt: at,
            pools: s.info().pools.map((p) => ({ template: p.key.template, net: p.key.net, size: p.key.size, warm: p.warm, target: p.target })),
          }),
        ),
      );
      if (addressless) await stack.publish({ node: "n0-noaddr", address: "", publishedAt: at, pools: [] });
      await Bun.sleep(1000);
    }
  })();
}, 90_000);

afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.stop("SIGKILL")));
  // A fresh Lease per test: a killed leader's Lease would otherwise make the next test wait out its 15 s.
  const r = await stack.cluster.adminFetch(`/apis/coordination.k8s.io/v1/namespaces/${NAMESPACE}/leases/cocoon-warmpool-driver`, { method: "DELETE" });
  await r.body?.cancel();
  for (const s of sims) s.log.clear();
});

afterAll(async () => {
  publishing = false;
  await publisherLoop;
  await Promise.all(sims.map((s) => s.stop()));
  await stack?.stop();
});

async function start(args: string[] = [`--sandboxd-token=${ROOT}`]): Promise<ApiserverProcess> {
  const s = await stack.startServer({ args: ["--warm-pool-sync-interval=1s", ...args] });
  servers.push(s);
  return s;
}

async function template(name: string, image = IMG, net?: string): Promise<void> {
  await stack.cluster.apply([
    {
      apiVersion: "extensions.agents.x-k8s.io/v1beta1",
      kind: "SandboxTemplate",
      metadata: { name, namespace: "pools" },
      spec: { podTemplate: { ...(net ? { metadata: { annotations: { "sandbox.cocoonstack.io/net": net } } } : {}), spec: { containers: [{ name: "c", image }] } } },
    },
  ]);
}

async function pool(name: string, replicas: number, templateName: string, annotations?: Record<string, string>): Promise<void> {
  await stack.cluster.apply([
    {
      apiVersion: "extensions.agents.x-k8s.io/v1beta1",
      kind: "SandboxWarmPool",
      metadata: { name, namespace: "pools", ...(annotations ? { annotations } : {}) },
      spec: { replicas, sandboxTemplateRef: { name: templateName } },
    },
  ]);
}

async function poolAnnotations(name: string): Promise<Record<string, string>> {
  const r = await stack.cluster.adminFetch(`/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/pools/sandboxwarmpools/${name}`);
  return ((await r.json()) as { metadata: { annotations?: Record<string, string> } }).metadata.annotations ?? {};
}

async function deletePool(name: string): Promise<void> {
  const r = await stack.cluster.adminFetch(`/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/pools/sandboxwarmpools/${name}`, { method: "DELETE" });
  await r.body?.cancel();
}

async function poolStatus(name: string): Promise<{ replicas?: number; readyReplicas?: number; selector?: string }> {
  const r = await stack.cluster.adminFetch(`/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/pools/sandboxwarmpools/${name}`);
  return ((await r.json()) as { status?: object }).status ?? {};
}

const puts = (s: SandboxdSim) => s.requests.filter((r) => r.route === "pools" && r.method === "PUT");
type PutEntry = { template: string; net: string; size: string; warm: number; idle_hibernate_seconds?: number; archive_after_seconds?: number; archive_delete_after_seconds?: number };
const lastPut = (s: SandboxdSim) => puts(s).at(-1)?.body as { pools: PutEntry[] } | undefined;

describe("warm-pool driver", () => {
  test("38: a pool of 5 over n1..n3 PUTs warm 2, 2, 1 in node order; status replicas = readyReplicas = the warm the nodes report, selector agents.x-k8s.io/warm-pool=<name>", async () => {
    await template("t38");
    await pool("p38", 5, "t38");
    await start();
    await waitFor("a PUT on every node", () => sims.every((s) => lastPut(s)), CONVERGE_MS);
    expect(sims.map((s) => lastPut(s)!.pools)).toEqual([
      [{ template: IMG, net: "none", size: "small", warm: 2 }],
      [{ template: IMG, net: "none", size: "small", warm: 2 }],
      [{ template: IMG, net: "none", size: "small", warm: 1 }],
    ]);
    expect(puts(sims[0]!).at(-1)!.auth).toBe("root");
    const st = await waitFor("status 5 once the nodes refilled", async () => {
      const s = await poolStatus("p38");
      return s.readyReplicas === 5 ? s : undefined;
    }, 15_000);
    expect(st).toEqual({ replicas: 5, readyReplicas: 5, selector: "agents.x-k8s.io/warm-pool=p38" });
    await deletePool("p38");
  }, 80_000);

  test("39: two pools (9 and 3, i.e. 3:1) with one key make one PUT entry per node summing them (warm 4 each), and statuses split 3:1", async () => {
    await template("t39", "img:shared");
    await pool("p39a", 9, "t39");
    await pool("p39b", 3, "t39");
    await start();
    // 12 over three nodes: 4 each, one entry per node for the shared key.
    await waitFor("warm 4 per node", () => sims.every((s) => lastPut(s)?.pools.some((p) => p.template === "img:shared" && p.warm === 4)), CONVERGE_MS);
    expect(lastPut(sims[0]!)!.pools.filter((p) => p.template === "img:shared")).toHaveLength(1);
    await waitFor("statuses 9 and 3", async () => (await poolStatus("p39a")).readyReplicas === 9 && (await poolStatus("p39b")).readyReplicas === 3, CONVERGE_MS);
    await deletePool("p39a");
    await deletePool("p39b");
  }, 80_000);

  test("40: a pool whose template is missing puts no key, leaves the other pools alone, and reports 0", async () => {
    await template("t40", "img:forty");
    await pool("p40-ok", 3, "t40");
    await pool("p40-missing", 3, "no-such-template");
    await stack.cluster.apply([
      { apiVersion: "extensions.agents.x-k8s.io/v1beta1", kind: "SandboxWarmPool", metadata: { name: "p40-missing", namespace: "pools" }, spec: { replicas: 3, sandboxTemplateRef: { name: "no-such-template" } }, status: { replicas: 7, readyReplicas: 7 } },
    ]);
    await start();
    await waitFor("PUTs", () => sims.every((s) => lastPut(s)), CONVERGE_MS);
    for (const s of sims) expect(lastPut(s)!.pools.map((p) => p.template)).toEqual(["img:forty"]);
    await waitFor("status 0", async () => (await poolStatus("p40-missing")).readyReplicas === 0, CONVERGE_MS);
    expect((await poolStatus("p40-missing")).replicas).toBe(0);
    await deletePool("p40-ok");
    await deletePool("p40-missing");
  }, 80_000);

  test("41: with the last pool deleted every node receives {\"pools\":[]}; a node with an empty address never gets a PUT", async () => {
    addressless = true;
    try {
      await template("t41");
      await pool("p41", 3, "t41");
      const s = await start();
      // From a cold start: the election, both informers' sync and a pass (about 1 s idle, far longer on a loaded CI box).
      await waitFor("one key per node", () => sims.every((x) => lastPut(x)?.pools.length === 1), CONVERGE_MS);
      await deletePool("p41");
      await waitFor("empty pool sets", () => sims.every((x) => lastPut(x)?.pools.length === 0), CONVERGE_MS);
      // Nothing addressed the address-less node: it has no address to call, and no error mentions it. (The fleet view
      // may log once that it ignores the inventory, when its Node informer has not yet seen the Node published just
      // before it: two watches have no order between them. That line is about trust, not a call.)
      const mentions = s.stderr().split("\n").filter((l) => l.includes("n0-noaddr") && !l.includes("ignoring a NodeInventory that no known Node vouches for"));
      expect(mentions).toEqual([]);
    } finally {
      addressless = false;
    }
  }, 80_000);

  test("issue 28.2: a pool's sleep annotations reach every node's PUT, the nodes accept them, and the pool's Sleep column says so; an egress pool's idle time is refused in its status and never sent", async () => {
    await template("t28", "img:sleepy");
    await template("t28e", "img:sleepy-egress", "egress");
    await pool("p28", 3, "t28", { "sandbox.cocoonstack.io/idle-hibernate-seconds": "300", "sandbox.cocoonstack.io/archive-after-seconds": "3600" });
    await pool("p28e", 3, "t28e", { "sandbox.cocoonstack.io/idle-hibernate-seconds": "60" });
    await start();
    const sleepy = (s: SandboxdSim) => lastPut(s)?.pools.find((p) => p.template === "img:sleepy");
    await waitFor("the sleep fields in every node's PUT", () => sims.every((s) => sleepy(s)?.idle_hibernate_seconds === 300), CONVERGE_MS);
    for (const s of sims) {
      expect(sleepy(s)).toEqual({ template: "img:sleepy", net: "none", size: "small", warm: 1, idle_hibernate_seconds: 300, archive_after_seconds: 3600 });
      // The egress pool still warms, without the idle time sandboxd would refuse (its whole PUT would be a 400).
      expect(lastPut(s)!.pools.find((p) => p.template === "img:sleepy-egress")).toEqual({ template: "img:sleepy-egress", net: "egress", size: "small", warm: 1 });
      expect(puts(s).at(-1)!.outcome).toBe(200);
      expect(s.node.pools.get({ template: "img:sleepy", net: "none", size: "small" })!.entry).toMatchObject({ idle_hibernate_seconds: 300, archive_after_seconds: 3600 });
    }
    await waitFor("the sleep-status annotations", async () => (await poolAnnotations("p28"))["sandbox.cocoonstack.io/sleep-status"] === "hibernate 300s, archive 3600s", CONVERGE_MS);
    expect((await poolAnnotations("p28e"))["sandbox.cocoonstack.io/sleep-status"]).toStartWith(
      "refused: sandbox.cocoonstack.io/idle-hibernate-seconds is not allowed on an egress pool (net=egress)",
    );
    // kubectl (the real one) shows the column from the CRD's printer columns.
    const table = await kubectl(["get", "sandboxwarmpools", "-n", "pools", "p28", "p28e"], { kubeconfig: stack.admin });
    expect(table.code).toBe(0);
    const lines = table.stdout.trim().split("\n");
    expect(lines[0]).toMatch(/^NAME\s+TEMPLATE\s+DESIRED\s+READY\s+SLEEP\s+AGE$/);
    expect(lines.find((l) => l.startsWith("p28 "))).toContain("hibernate 300s, archive 3600s");
    expect(lines.find((l) => l.startsWith("p28e "))).toContain("refused: sandbox.cocoonstack.io/idle-hibernate-seconds is not allowed");
    // The chart's admission policy lets the apiserver's ServiceAccount write that status, never the policy itself.
    const asServer = (patch: object) => kubectl(["patch", "sandboxwarmpool", "p28", "-n", "pools", "--type", "merge", "-p", JSON.stringify(patch)], { kubeconfig: stack.serverKubeconfig });
    const own = await asServer({ metadata: { annotations: { "sandbox.cocoonstack.io/sleep-status": "hibernate 300s, archive 3600s" } } });
    expect([own.code, own.stderr]).toEqual([0, ""]);
    const policy = await asServer({ metadata: { annotations: { "sandbox.cocoonstack.io/idle-hibernate-seconds": "1" } } });
    expect(policy.code).not.toBe(0);
    expect(policy.stderr).toContain("may change only the annotations sandbox.cocoonstack.io/autoscale-status and sandbox.cocoonstack.io/sleep-status");
    // The annotation goes away with the policy: the next pass sends no sleep fields and clears the column.
    await stack.cluster.apply([
      { apiVersion: "extensions.agents.x-k8s.io/v1beta1", kind: "SandboxWarmPool", metadata: { name: "p28", namespace: "pools", annotations: { "sandbox.cocoonstack.io/idle-hibernate-seconds": "0", "sandbox.cocoonstack.io/archive-after-seconds": "0" } }, spec: { replicas: 4, sandboxTemplateRef: { name: "t28" } } },
    ]);
    await waitFor("PUTs without sleep fields", () => sims.every((s) => sleepy(s) !== undefined && sleepy(s)!.idle_hibernate_seconds === undefined), CONVERGE_MS);
    await waitFor("the column cleared", async () => (await poolAnnotations("p28"))["sandbox.cocoonstack.io/sleep-status"] === undefined, CONVERGE_MS);
    await deletePool("p28");
    await deletePool("p28e");
  }, 80_000);

  test("37 (driver): with no sandboxd token the driver sends no PUT but still writes status from inventory warm counts", async () => {
    // Warm VMs from an earlier test's pool set are still reported by the inventories.
    await template("t37", "img:seeded");
    for (const s of sims) s.setWarm({ template: "img:seeded", net: "none", size: "small" }, 2);
    await pool("p37", 3, "t37");
    const s = await start([]);
    await waitFor("status from inventory counts", async () => (await poolStatus("p37")).readyReplicas === 6, CONVERGE_MS);
    for (const x of sims) expect(puts(x)).toHaveLength(0);
    expect(s.stderr()).toContain("warm-pool driver has no sandboxd token; skipping pool apply (fail-closed)");
    await deletePool("p37");
  }, 45_000);
});

describe("leader election", () => {
  test("leadership changes are LeaderElection Events on the Lease, as client-go records them, written under the chart's RBAC", async () => {
    const s = await start();
    await waitFor("leadership", () => s.stderr().includes("became the warm-pool driver leader"), CONVERGE_MS);
    const leaseRes = await stack.cluster.adminFetch(`/apis/coordination.k8s.io/v1/namespaces/${NAMESPACE}/leases/cocoon-warmpool-driver`);
    const lease = (await leaseRes.json()) as { metadata: { uid: string }; spec: { holderIdentity: string } };
    const identity = lease.spec.holderIdentity;
    interface Ev {
      type: string;
      reason: string;
      message: string;
      involvedObject: { apiVersion: string; kind: string; name: string; namespace: string; uid: string };
      source: { component: string };
    }
    const eventsOf = async (message: string) => {
      const r = await stack.cluster.adminFetch(`/api/v1/namespaces/${NAMESPACE}/events?fieldSelector=reason%3DLeaderElection`);
      return ((await r.json()) as { items: Ev[] }).items.filter((e) => e.message === message);
    };
    const became = await waitFor("the became-leader Event", async () => (await eventsOf(`${identity} became leader`))[0], CONVERGE_MS);
    expect(became).toMatchObject({
      type: "Normal",
      reason: "LeaderElection",
      involvedObject: { apiVersion: "coordination.k8s.io/v1", kind: "Lease", name: "cocoon-warmpool-driver", namespace: NAMESPACE, uid: lease.metadata.uid },
      source: { component: "sandbox-apiserver" },
    });
    // A clean stop gives the Lease up and records the loss before the process exits.
    expect(await s.stop("SIGTERM")).toBe(0);
    const stopped = await eventsOf(`${identity} stopped leading`);
    expect(stopped).toHaveLength(1);
    expect(stopped[0]!.involvedObject.uid).toBe(lease.metadata.uid);
    // No write was refused: the RBAC the chart renders grants events create.
    expect(s.stderr()).not.toContain("event write failed");
  }, 80_000);

  test("42: of two replicas only the Lease holder PUTs; after kill -9 the other takes over within about 15 s", async () => {
    await template("t42");
    await pool("p42", 3, "t42");
    const a = await start();
    await waitFor("first PUTs", () => sims.every((x) => lastPut(x)), CONVERGE_MS);
    const b = await start();
    const lease = async () => {
      const r = await stack.cluster.adminFetch(`/apis/coordination.k8s.io/v1/namespaces/${NAMESPACE}/leases/cocoon-warmpool-driver`);
      return ((await r.json()) as { spec: { holderIdentity: string; acquireTime: string; renewTime: string } }).spec;
    };
    const first = (await lease()).holderIdentity;
    await Bun.sleep(3000);
    expect(a.stderr()).toContain("became the warm-pool driver leader");
    expect(b.stderr()).not.toContain("became the warm-pool driver leader");
    const killedAt = Date.now();
    a.proc.kill("SIGKILL");
    await a.proc.exited;
    const lastRenew = Date.parse((await lease()).renewTime); // a is dead: its final renewal
    for (const s of sims) s.log.clear();
    await waitFor("takeover", () => b.stderr().includes("became the warm-pool driver leader"), 40_000);
    const taken = await lease();
    expect(taken.holderIdentity).not.toBe(first);
    // Judged by the acquireTime b wrote (one host, one clock), not by when this busy test process read b's log: never
    // before a's 15 s lease ran out, and within lease 15 s + one 2 s retry + slack for late timers after the kill.
    const acquired = Date.parse(taken.acquireTime);
    expect(acquired - lastRenew).toBeGreaterThanOrEqual(15_000);
    expect(acquired - killedAt).toBeLessThan(22_000);
    // The new leader drives: pools converge again.
    await waitFor("PUTs from the new leader", () => sims.every((x) => lastPut(x)?.pools[0]?.warm === 1), CONVERGE_MS);
    await deletePool("p42");
  }, 120_000);

  test("43: a leader that cannot renew its Lease for 10 s stops driving but keeps serving, and re-enters the election at least 5 s later", async () => {
    await template("t43");
    await pool("p43", 3, "t43");
    const s = await start();
    await stack.register(s.port);
    await waitFor("leadership", () => s.stderr().includes("became the warm-pool driver leader"), CONVERGE_MS);
    const binding = `/apis/rbac.authorization.k8s.io/v1/namespaces/${NAMESPACE}/rolebindings/sandbox-apiserver-leader-election`;
    const saved = (await (await stack.cluster.adminFetch(binding)).json()) as { metadata: Record<string, unknown> };
    await (await stack.cluster.adminFetch(binding, { method: "DELETE" })).body?.cancel();
    const lostAt = Date.now();
    await waitFor("the driver to stop", () => s.stderr().includes("could not renew the warm-pool driver lease"), 20_000);
    expect(Date.now() - lostAt).toBeGreaterThanOrEqual(8_000);
    // Reads keep working through the aggregator while the driver is down.
    expect((await stack.cluster.adminFetch("/apis/agents.x-k8s.io/v1beta1/sandboxes")).status).toBe(200);
    await stack.cluster.apply([{ ...saved, metadata: { name: "sandbox-apiserver-leader-election", namespace: NAMESPACE } }]);
    await waitFor("leadership again", () => s.stderr().split("became the warm-pool driver leader").length === 3, 30_000);
    // Judged by the process's own log times: from stepping down to leading again is at least the 5 s rebuild delay.
    const times = (msg: string) =>
      s
        .stderr()
        .split("\n")
        .filter((l) => l.startsWith("{") && l.includes(msg))
        .map((l) => Date.parse((JSON.parse(l) as { time: string }).time));
    const steppedDown = times("could not renew the warm-pool driver lease")[0]!;
    const ledAgain = times("became the warm-pool driver leader")[1]!;
    expect(ledAgain - steppedDown).toBeGreaterThanOrEqual(5_000);
    await deletePool("p43");
  }, 100_000);
});
