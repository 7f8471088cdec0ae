// kubectl shows the fleet (issue 21 item 3): the real kubectl, through the real kube-apiserver's aggregation, prints
// the Table this server serves — Name, Phase, Node, Template, Age; `-o wide` adds Claim ID, Address, Deadline — and
// `get -w` rewrites a row's cells when a publish changes the sandbox's phase. `-o json` is the same object as before.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { kubectl, kubectlStream } from "../../kube/kubectl.ts";
import { type ApiserverProcess, type InventoryInput, type Stack, rfc3339, startStack } from "./fixture.ts";
import { waitFor } from "#tests/support/wait.ts";

const IMG = "ghcr.io/fleet/base:1";
let stack: Stack;
let server: ApiserverProcess;

const k = (args: string[]) => kubectl(args, { kubeconfig: stack.admin });
const now = () => rfc3339(Date.now());

beforeAll(async () => {
  stack = await startStack();
  // Events live in the sandbox's namespace, which must exist in Kubernetes (the sandboxes themselves need none).
  await stack.cluster.apply("apiVersion: v1\nkind: Namespace\nmetadata: {name: view}");
  server = await stack.startServer({ args: ["--enable-warm-pool-driver=false"] });
  await stack.register(server.port);
}, 120_000);

afterAll(async () => {
  await server?.stop();
  await stack?.stop();
});

const claimedAt = rfc3339(Date.now() - 3 * 3600_000 - 5 * 60_000); // 3h5m ago
const entries = (phase: string) => [
  { name: "view/alpha", id: "sb_alpha", phase, template: IMG, addr: "10.1.2.3:7777", deadline: "2027-01-02T03:04:05Z", claimedAt, claimRef: "view/alpha" },
  { name: "view/bare", phase: "Running" },
];
const inv = (phase: string): InventoryInput => ({ node: "node-a", address: "127.0.0.1:1", publishedAt: now(), entries: entries(phase) });

async function rows(args: string[], want: number): Promise<string[]> {
  return waitFor(`${want} lines of kubectl ${args.join(" ")}`, async () => {
    const r = await k(args);
    const lines = r.stdout.split("\n").filter(Boolean);
    return lines.length === want ? lines : undefined;
  }, 15_000);
}

describe("kubectl get sandboxes (issue 21 item 3)", () => {
  test("columns Name, Phase, Node, Template, Age with the node's values; what a node did not report prints <none>/<unknown>", async () => {
    await stack.publish(inv("Running"));
    const lines = await rows(["get", "sandboxes", "-n", "view"], 3);
    expect(lines[0]).toMatch(/^NAME\s+PHASE\s+MODE\s+NODE\s+TEMPLATE\s+AGE$/);
    expect(lines[1]).toMatch(new RegExp(`^alpha\\s+Running\\s+Running\\s+node-a\\s+${IMG.replace(/[.:/]/g, "\\$&")}\\s+3h5m$`));
    expect(lines[2]).toMatch(/^bare\s+Running\s+Running\s+node-a\s+<none>\s+<unknown>$/);
    const all = await k(["get", "sandboxes", "-A"]);
    expect(all.stdout.split("\n")[0]).toMatch(/^NAMESPACE\s+NAME\s+PHASE\s+MODE\s+NODE\s+TEMPLATE\s+AGE$/);
  });

  test("-o wide adds Claim ID, Address and Deadline", async () => {
    await stack.publish(inv("Running"));
    const lines = await rows(["get", "sandboxes", "-n", "view", "-o", "wide"], 3);
    expect(lines[0]).toMatch(/^NAME\s+PHASE\s+MODE\s+NODE\s+TEMPLATE\s+AGE\s+CLAIM ID\s+ADDRESS\s+DEADLINE$/);
    expect(lines[1]).toMatch(/^alpha\s+Running\s+Running\s+node-a\s+\S+\s+3h5m\s+sb_alpha\s+10\.1\.2\.3\s+2027-01-02T03:04:05Z$/);
    expect(lines[2]).toMatch(/^bare\s+Running\s+Running\s+node-a\s+<none>\s+<unknown>\s+<none>\s+<none>\s+<none>$/);
  });

  test("-o json is the Sandbox object itself, unchanged by the Table", async () => {
    await stack.publish(inv("Running"));
    const obj = await waitFor("alpha as JSON", async () => {
      const r = await k(["get", "sandbox", "alpha", "-n", "view", "-o", "json"]);
      return r.code === 0 ? JSON.parse(r.stdout) : undefined;
    }, 15_000);
    expect(obj.kind).toBe("Sandbox");
    expect(obj.apiVersion).toBe("agents.x-k8s.io/v1beta1");
    expect(obj.metadata.labels).toEqual({
      "sandbox.cocoonstack.io/node": "node-a",
      "sandbox.cocoonstack.io/phase": "Running",
      "sandbox.cocoonstack.io/template": IMG,
      "sandbox.cocoonstack.io/claim": "alpha",
    });
    expect(obj.metadata.annotations).toEqual({ "sandbox.cocoonstack.io/claim-id": "sb_alpha", "sandbox.cocoonstack.io/deadline": "2027-01-02T03:04:05Z" });
    expect(obj.metadata.creationTimestamp).toBe(claimedAt);
    expect(obj.status).toEqual({
      nodeName: "node-a",
      podIPs: ["10.1.2.3"],
      conditions: [
        { type: "Ready", status: "True", reason: "Running", message: 'phase "Running" reported by node "node-a" inventory' },
        { type: "Suspended", status: "False", reason: "Running", message: 'running on node "node-a"' },
      ],
    });
    expect(obj).not.toHaveProperty("cells");
    const list = JSON.parse((await k(["get", "sandboxes", "-n", "view", "-o", "json"])).stdout);
    expect(list.kind).toBe("List");
    expect(list.items.map((i: { kind: string; metadata: { name: string } }) => `${i.kind}/${i.metadata.name}`)).toEqual(["Sandbox/alpha", "Sandbox/bare"]);
  });

  test("get -w (Table watch events) rewrites the row when a publish changes the phase, and back", async () => {
    await stack.publish(inv("Running"));
    await rows(["get", "sandboxes", "-n", "view"], 3);
    const w = await kubectlStream(["get", "sandboxes", "-n", "view", "-w", "-o", "wide"], { kubeconfig: stack.admin });
    try {
      expect(await w.waitFor(/^NAME\s+PHASE\s+MODE\s+NODE/, 20_000)).toMatch(/CLAIM ID\s+ADDRESS\s+DEADLINE$/);
      await w.waitFor(/^alpha\s+Running\s+Running\s+node-a\s/, 20_000);
      await stack.publish(inv("Hibernated"));
      expect(await w.waitFor(/^alpha\s+Hibernated\s/, 10_000)).toMatch(/^alpha\s+Hibernated\s+Suspended\s+node-a\s+\S+\s+3h5m\s+sb_alpha\s+10\.1\.2\.3\s+2027-01-02T03:04:05Z$/);
      await stack.publish(inv("Running"));
      await w.waitFor(/^alpha\s+Running\s+Running\s+node-a\s/, 10_000);
    } finally {
      await w.stop();
    }
  }, 60_000);
});

interface CoreEvent {
  reason: string;
  type: string;
  message: string;
  count?: number;
  involvedObject: { apiVersion?: string; kind?: string; name?: string; namespace?: string; uid?: string };
}

async function eventsOf(name: string): Promise<CoreEvent[]> {
  const r = await stack.cluster.adminFetch(`/api/v1/namespaces/view/events?fieldSelector=${encodeURIComponent(`involvedObject.name=${name},involvedObject.kind=Sandbox`)}`);
  return ((await r.json()) as { items: CoreEvent[] }).items;
}
const reasons = async (name: string) => new Set((await eventsOf(name)).map((e) => e.reason));
const hasReasons = (name: string, want: string[]) => waitFor(`${name} events ${want.join(", ")}`, async () => {
  const got = await reasons(name);
  return want.every((w) => got.has(w)) ? got : undefined;
}, 15_000);

describe("Kubernetes Events for sandboxes (issue 21 item 3)", () => {
  const beta = (phase: string) => ({ name: "view/beta", id: "sb_beta", phase, template: IMG, claimedAt });

  test("claim, pause, resume and release seen in inventory become core Events on the Sandbox; kubectl describe and get events show them", async () => {
    await stack.publish(inv("Running"));
    await rows(["get", "sandboxes", "-n", "view"], 3);
    // Each publish is one transition of beta, on a node that stays fresh.
    const publish = async (extra: Record<string, unknown>[]) => stack.publish({ ...inv("Running"), entries: [...entries("Running"), ...extra] });
    await publish([beta("Running")]);
    await hasReasons("beta", ["Claimed"]);
    await publish([beta("Hibernated")]);
    await hasReasons("beta", ["Paused"]);
    await publish([beta("Running")]);
    await hasReasons("beta", ["Resumed"]);
    const evs = await eventsOf("beta");
    const claimed = evs.find((e) => e.reason === "Claimed")!;
    expect(claimed.type).toBe("Normal");
    expect(claimed.message).toBe('claimed on node "node-a" (claim id sb_beta)');
    expect(claimed.involvedObject).toMatchObject({ apiVersion: "agents.x-k8s.io/v1beta1", kind: "Sandbox", name: "beta", namespace: "view" });

    const described = await k(["describe", "sandbox", "beta", "-n", "view"]);
    expect(described.stderr).toBe("");
    expect(described.code).toBe(0);
    expect(described.stdout).toMatch(/^Name:\s+beta$/m);
    expect(described.stdout).toMatch(/^Events:/m);
    for (const r of ["Claimed", "Paused", "Resumed"]) expect(described.stdout).toMatch(new RegExp(`Normal\\s+${r}\\s`));

    await publish([]);
    await hasReasons("beta", ["Released"]);
    const listed = await k(["get", "events", "-n", "view", "--field-selector", "involvedObject.name=beta"]);
    expect(listed.stdout).toMatch(/Released\s+sandbox\/beta\s+released by node "node-a" \(claim id sb_beta\)/);
  }, 60_000);

  test("a node that stops being fresh makes its sandboxes Lost (Warning); its return makes them Recovered", async () => {
    await stack.publish({ node: "node-b", address: "127.0.0.2:1", publishedAt: now(), entries: [{ name: "view/gamma", id: "sb_gamma", phase: "Running" }] });
    await waitFor("gamma listed", async () => (await k(["get", "sandbox", "gamma", "-n", "view"])).code === 0, 15_000);
    await stack.unpublish("node-b");
    const lost = await waitFor("gamma Lost", async () => (await eventsOf("gamma")).find((e) => e.reason === "Lost"), 15_000);
    expect(lost.type).toBe("Warning");
    expect(lost.message).toContain('node "node-b" no longer publishes a fresh inventory');
    await stack.publish({ node: "node-b", address: "127.0.0.2:1", publishedAt: now(), entries: [{ name: "view/gamma", id: "sb_gamma", phase: "Running" }] });
    await hasReasons("gamma", ["Recovered"]);
    // A node rejoining is not a claim.
    expect(await reasons("gamma")).not.toContain("Claimed");
  }, 60_000);

  test("a flapping sandbox is rate-limited: 60 phase flips write at most the object's burst of 25, on a handful of Events", async () => {
    const flappy = (phase: string) => ({ name: "view/flappy", id: "sb_flappy", phase });
    const publish = (phase: string, extra: Record<string, unknown>[] = []) =>
      stack.publish({ node: "node-a", address: "127.0.0.1:1", publishedAt: now(), entries: [...entries("Running"), flappy(phase), ...extra] });
    await publish("Running");
    await hasReasons("flappy", ["Claimed"]);
    for (let i = 0; i < 30; i++) {
      await publish("Hibernated");
      await publish("Running");
    }
    const total = async () => (await eventsOf("flappy")).reduce((n, e) => n + (e.count ?? 1), 0);
    await waitFor("flappy's 25 admitted events written", async () => (await total()) >= 25, 30_000);
    // A later transition of another sandbox is written, so the pipeline is past every flip; flappy stays at 25.
    await publish("Running", [{ name: "view/fence", id: "sb_fence", phase: "Running" }]);
    await hasReasons("fence", ["Claimed"]);
    expect(await total()).toBe(25);
    const evs = await eventsOf("flappy");
    expect(evs.length).toBeLessThanOrEqual(5);
    expect(evs.some((e) => e.message.startsWith("(combined from similar events): "))).toBe(true);
  }, 120_000);
});
